"""OpenAI's Responses API over a chat-shaped upstream: the request as chat completions,
the chat answer and its stream as a Response and its events. Pure; used by the adapters
whose upstream has no Responses API of its own (Gemini, Anthropic)."""

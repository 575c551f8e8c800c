"""The simulator's native upstream formats beside OpenAI's: Anthropic's Messages and
Gemini's generateContent, planned by the same behaviour and faults as chat."""

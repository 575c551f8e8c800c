"""OpenAI's other ingress APIs (embeddings, legacy completions, Responses) on the chat
request path: what each checks, sends upstream, counts when usage is missing, and how its
stream reaches the client (`spec.SPECS`)."""

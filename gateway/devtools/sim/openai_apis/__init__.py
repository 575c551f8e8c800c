"""OpenAI's other APIs in the simulator: legacy completions, embeddings and Responses, on
the chat's reply plans, faults and streaming loop (`routes.OpenAIRoutes`)."""

"""The upstream simulator: an OpenAI-compatible provider with latencies and faults.

settings.py  the config's `sim:` section (pydantic, key-path errors)
request.py   a chat request, checked like OpenAI would
tokens.py    offline token counts and one-token text pieces (bpe-openai, o200k_base)
behaviour.py the pure plan of a reply: latencies, lengths, tool calls, usage
faults.py    which fault a request suffers (pure table, one draw per request)
bodies.py    OpenAI-shaped JSON bodies and SSE chunks
stats.py     counters for tests (the Authorization header only as a hash)
state.py     what the routes share: settings, fault table, counters, overrides
responses.py connection resets, streams that stop when the client leaves
control.py   the /_sim control API
server.py    Starlette on uvicorn: the chat API, streaming, faults; build_app, serve
process.py   the sim as a child process, and a client of its control API
"""

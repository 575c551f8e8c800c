"""Anthropic's Messages API at `POST /v1/messages`: validation, Anthropic's error shapes,
the flow through routing, attempts and the ledger, and its stream relay."""

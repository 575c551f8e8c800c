"""The APIs an app calls through the gateway: the ledger's `endpoint` vocabulary.

One name per ingress API, as the ledger and the dashboard show it. Which model serves
which of them follows from its kind (a chat model or an embedding model) and from what
its provider's adapter speaks (`gateway.providers.adapter.ProviderAdapter.endpoints`).
"""

from __future__ import annotations

from enum import StrEnum


class Endpoint(StrEnum):
    CHAT_COMPLETIONS = "chat.completions"  # POST /v1/chat/completions
    COMPLETIONS = "completions"  # POST /v1/completions (legacy)
    EMBEDDINGS = "embeddings"  # POST /v1/embeddings
    RESPONSES = "responses"  # POST /v1/responses
    MESSAGES = "messages"  # POST /v1/messages (Anthropic's API)
    BATCH = "batch"  # one line of a batch (/v1/batches, /v1/messages/batches)


# What each kind of model can serve at most (its provider's adapter may serve less).
KIND_ENDPOINTS: dict[str, frozenset[Endpoint]] = {
    "chat": frozenset(
        {Endpoint.CHAT_COMPLETIONS, Endpoint.COMPLETIONS, Endpoint.RESPONSES, Endpoint.MESSAGES}
    ),
    "embedding": frozenset({Endpoint.EMBEDDINGS}),
}

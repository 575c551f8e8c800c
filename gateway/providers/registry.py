"""Which adapter speaks to a provider: one instance per wire format, keyed by
`Provider.kind`. A new wire format is one more entry here (and one more `kind` value
in `gateway.domain.config.Provider`)."""

from __future__ import annotations

from gateway.domain.config import Provider
from gateway.domain.endpoints import Endpoint
from gateway.providers.adapter import ProviderAdapter
from gateway.providers.anthropic import AnthropicAdapter
from gateway.providers.gemini import GeminiAdapter
from gateway.providers.openai import OpenAIAdapter

ADAPTERS: dict[str, ProviderAdapter] = {
    OpenAIAdapter.kind: OpenAIAdapter(),
    AnthropicAdapter.kind: AnthropicAdapter(),
    GeminiAdapter.kind: GeminiAdapter(),
}


def adapter_for(provider: Provider) -> ProviderAdapter:
    try:
        return ADAPTERS[provider.kind]
    except KeyError:
        # config validation admits only known kinds; this guards a config built in code
        raise ValueError(
            f"provider {provider.name!r}: no adapter for kind {provider.kind!r} "
            f"(known: {', '.join(sorted(ADAPTERS))})"
        ) from None


# every adapter serves these: chat natively or translated, and Anthropic's Messages
# through chat where the adapter does not speak it (gateway.replica.messages)
_ALWAYS = frozenset({Endpoint.CHAT_COMPLETIONS, Endpoint.MESSAGES})


def endpoints_of(adapter: ProviderAdapter) -> frozenset[Endpoint]:
    """The ingress APIs an adapter serves: chat completions and Messages always, plus what
    it declares."""
    declared = getattr(adapter, "endpoints", None)
    if isinstance(declared, frozenset):
        return declared | _ALWAYS
    return _ALWAYS

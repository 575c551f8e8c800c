"""What sets one ingress API apart on the shared request path, as data: `SPECS[endpoint]`.

Auth, routing, attempts, the relay and the record are the same for every API
(`gateway.replica.service`); an `EndpointSpec` says how this API's body is checked, what
goes upstream, how the provider's adapter builds and reads it, what an estimate counts
when no usage came back, and how its stream is written for the client. A model serves an
API when its kind and its provider's adapter both do (`model_endpoints`): a plan keeps
only such models, and a name with none is the client's 400, never a silent drop.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from gateway.domain.config import Config, Model
from gateway.domain.endpoints import KIND_ENDPOINTS, Endpoint
from gateway.domain.openai_errors import bad_request
from gateway.domain.usage_record import RequestStatus
from gateway.providers.adapter import (
    ChatReply,
    EndpointAdapter,
    ProviderAdapter,
    StreamParser,
    WireRequest,
)
from gateway.providers.registry import adapter_for, endpoints_of
from gateway.replica.chat_request import ChatRequest, upstream_body, validate_chat_request
from gateway.replica.endpoints import requests
from gateway.replica.stream_relay import CHAT_FORMAT, ClientFormat
from gateway.routing.policy import RoutePlan

# builds the wire request from (provider, body, provider key); parses a 200 body
WireBuilder = Callable[[Any, dict[str, Any], str | None], WireRequest]
Parser = Callable[[bytes], ChatReply]

ROUTES = {
    Endpoint.CHAT_COMPLETIONS: "/v1/chat/completions",
    Endpoint.COMPLETIONS: "/v1/completions",
    Endpoint.EMBEDDINGS: "/v1/embeddings",
    Endpoint.RESPONSES: "/v1/responses",
    Endpoint.MESSAGES: "/v1/messages",
}


@dataclasses.dataclass(frozen=True, slots=True)
class EndpointSpec:
    endpoint: Endpoint
    validate: Callable[[Any], ChatRequest]
    upstream_body: Callable[[ChatRequest, str], dict[str, Any]]
    prompt: Callable[[dict[str, Any]], list[dict[str, Any]] | None]  # body -> estimate input
    stream_format: ClientFormat = CHAT_FORMAT

    def wire(self, adapter: ProviderAdapter) -> tuple[WireBuilder | None, Parser | None]:
        """How the adapter builds and reads this API (None, None: its chat methods)."""
        if self.endpoint is Endpoint.CHAT_COMPLETIONS or not isinstance(
            adapter, EndpointAdapter
        ):
            return None, None
        endpoint, native = self.endpoint, adapter

        def build(provider: Any, body: dict[str, Any], key: str | None) -> WireRequest:
            return native.endpoint_request(provider, endpoint, body, key)

        return build, lambda content: native.parse_endpoint(endpoint, content)

    def settle(
        self, status: RequestStatus, http_status: int, error_class: str | None, answer: Any
    ) -> tuple[RequestStatus, int, str | None]:
        """The record's outcome. A Responses answer the upstream marked `failed` (its body's
        or its stream's last event's status) is the upstream's error, though it is billed
        and relayed as it came; `incomplete` (a token cap) is an answer."""
        if self.endpoint is Endpoint.RESPONSES and status is RequestStatus.OK and (
            answer == "failed"
        ):
            return RequestStatus.UPSTREAM_ERROR, http_status, "response_failed"
        return status, http_status, error_class

    def stream_parser(self, adapter: ProviderAdapter) -> StreamParser:
        if self.endpoint is not Endpoint.CHAT_COMPLETIONS and isinstance(adapter, EndpointAdapter):
            return adapter.endpoint_stream_parser(self.endpoint)
        return adapter.stream_parser()


def _responses_event(event: dict[str, Any], model: str, _usage: bool) -> bytes:
    """A Responses event as OpenAI writes it: named, with the model the client asked for."""
    response = event.get("response")
    if isinstance(response, dict) and "model" in response:
        event["response"] = {**response, "model": model}
    kind = str(event.get("type") or "message")
    data = json.dumps(event, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


def _responses_error(message: str) -> bytes:
    event = {"type": "error", "code": "upstream_error", "message": message, "param": None}
    return _responses_event(event, "", False)


RESPONSES_FORMAT = ClientFormat(encode=_responses_event, done=None, error=_responses_error)

SPECS: dict[Endpoint, EndpointSpec] = {
    Endpoint.CHAT_COMPLETIONS: EndpointSpec(
        Endpoint.CHAT_COMPLETIONS, validate_chat_request, upstream_body,
        lambda body: body.get("messages"),
    ),
    Endpoint.COMPLETIONS: EndpointSpec(
        Endpoint.COMPLETIONS, requests.validate_completions_request, requests.completions_body,
        lambda body: requests.prompt_messages(body.get("prompt")),
    ),
    Endpoint.EMBEDDINGS: EndpointSpec(
        Endpoint.EMBEDDINGS, requests.validate_embeddings_request, requests.with_model,
        lambda body: requests.prompt_messages(body.get("input")),
    ),
    Endpoint.RESPONSES: EndpointSpec(
        Endpoint.RESPONSES, requests.validate_responses_request, requests.with_model,
        requests.responses_messages, RESPONSES_FORMAT,
    ),
}


def model_endpoints(cfg: Config, model: Model) -> frozenset[Endpoint]:
    """The APIs a model serves: those of its kind that its provider's adapter speaks."""
    adapter = adapter_for(cfg.provider(model.provider))
    return KIND_ENDPOINTS[model.kind] & endpoints_of(adapter)


def serving_plan(plan: RoutePlan, endpoint: Endpoint, cfg: Config, requested: str) -> RoutePlan:
    """The plan's models that serve `endpoint`; a 400 naming the route when none does."""
    serves = {m: endpoint in model_endpoints(cfg, cfg.models_by_name[m]) for m in plan.models}
    models = tuple(m for m in plan.models if serves[m])
    if models == plan.models:
        return plan
    if not models:
        kinds = {cfg.models_by_name[m].kind for m in plan.models}
        raise bad_request(
            f"The model {requested[:80]!r} does not serve {ROUTES[endpoint]} "
            f"({'/'.join(sorted(kinds))} model"
            f"{'' if len(plan.models) == 1 else 's'} on this route).",
            param="model",
            code="unsupported_endpoint",
        )
    return dataclasses.replace(plan, models=models)

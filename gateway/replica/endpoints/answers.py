"""What every answer of the request path carries besides its body: the gateway's headers
(request id, the model and provider that answered, the replica, a plain answer's cost),
and the JSON encodings of answers and errors."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from fastapi.responses import JSONResponse, Response

from gateway.domain import json_codec
from gateway.domain.openai_errors import OpenAIError
from gateway.replica.exchange import Exchange

MODEL_HEADER = "x-costgate-model"
PROVIDER_HEADER = "x-costgate-provider"
# Serve sets its own x-request-id on every response, so ours has a name of its own
REQUEST_ID_HEADER = "x-costgate-request-id"
# the replica that answered (Serve's replica tag), for ops tracing a request to its logs
REPLICA_HEADER = "x-costgate-replica"
# a plain answer's cost in USD as the provider bills it and at list price (LiteLLM's
# x-litellm-response-cost is what users script against); "unknown" when it is not known
COST_HEADER = "x-costgate-cost-usd"
LIST_COST_HEADER = "x-costgate-list-cost-usd"


def usd_text(amount: Decimal | None) -> str:
    """An exact USD amount as plain decimal text ("0.000042"), "unknown" for None."""
    return "unknown" if amount is None else format(amount.normalize(), "f")


def answer_headers(ex: Exchange, replica_id: str | None) -> dict[str, str]:
    headers = {REQUEST_ID_HEADER: str(ex.request_id)}
    if ex.model is not None:
        headers[MODEL_HEADER] = ex.model.name
        headers[PROVIDER_HEADER] = ex.model.provider
    if replica_id is not None:
        headers[REPLICA_HEADER] = replica_id
    if ex.costs is not None and not ex.stream:
        headers[COST_HEADER], headers[LIST_COST_HEADER] = map(usd_text, ex.costs)
    return headers


def error_answer(ex: Exchange, err: OpenAIError, extra: dict[str, str] | None = None
                 ) -> Response:
    """`extra`: headers every answer carries (the key's rate limits); the error's win."""
    headers = {REQUEST_ID_HEADER: str(ex.request_id)} | (extra or {}) | err.headers
    if ex.model is not None:
        headers[MODEL_HEADER] = ex.model.name
    return Response(
        err.body_bytes(), status_code=err.status, headers=headers, media_type="application/json"
    )


def json_response(body: Any, headers: dict[str, str]) -> Response:
    """JSONResponse's bytes, encoded by orjson: every plain answer is re-serialised here."""
    return Response(json_codec.dumps(body), headers=headers, media_type="application/json")


def json_error(err: OpenAIError) -> JSONResponse:
    return JSONResponse(json.loads(err.body_bytes()), status_code=err.status, headers=err.headers)

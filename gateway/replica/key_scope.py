"""What one gateway key may do, and the check of a request against it: pure, no I/O.

A key's scope is stored with it (`db.keys`) and travels with its `Caller`
(`gateway.replica.auth`). The check runs once the body is valid and before anything is
routed (`GatewayService._chat`), so a refusal costs no upstream call and, the caller
being known, still leaves its one ledger row.

The models a key may name are public names, models and aliases alike. A request for an
allowed alias may reach any of the alias's candidates and fallbacks: the operator chose
those. Forcing one model with `x-costgate-model` is a choice of the caller's, so that
model must itself be in the scope.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import TypeGuard

from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError, bad_request
from gateway.replica.chat_request import ChatRequest
from gateway.routing.policy import MODEL_HEADER

# the names an error lists at most: a long scope must not make a long error body
_LISTED = 10


@dataclasses.dataclass(frozen=True, slots=True)
class KeyScope:
    models: frozenset[str] | None = None  # public model and alias names; None: any
    max_n: int | None = None
    max_output_tokens: int | None = None  # the largest max_tokens / max_completion_tokens
    expires_at: dt.datetime | None = None
    admin: bool = False  # reaches the administrative endpoints (`/costgate/routing`)

    def expired(self, now: dt.datetime) -> bool:
        return self.expires_at is not None and now >= self.expires_at


UNSCOPED = KeyScope()


# where each API takes its output limit; embeddings produce no output tokens
OUTPUT_LIMIT_FIELD = {
    Endpoint.CHAT_COMPLETIONS: "max_tokens",  # every OpenAI-compatible API takes it
    Endpoint.COMPLETIONS: "max_tokens",
    Endpoint.RESPONSES: "max_output_tokens",
    Endpoint.MESSAGES: "max_tokens",  # required there: never missing
}


def check_request(
    scope: KeyScope,
    req: ChatRequest,
    headers: Mapping[str, str],
    endpoint: Endpoint = Endpoint.CHAT_COMPLETIONS,
) -> ChatRequest:
    """Raise the client's error when `req` (validated) asks for more than `scope` allows;
    return the request as it may go upstream (the key's output cap made explicit)."""
    if scope.admin:
        # an admin key runs the gateway; spending on models is an app's key's business
        raise OpenAIError(403, "An admin gateway key cannot call models; use an app's key.",
                          code="admin_key_not_for_models")  # fmt: skip
    if scope.models is not None:
        if req.model not in scope.models:
            raise _not_allowed(req.model, "model", scope.models)
        forced = (headers.get(MODEL_HEADER) or "").strip()
        if forced and forced not in scope.models:
            raise _not_allowed(forced, MODEL_HEADER, scope.models)
    for name in ("n", "best_of"):  # each is as many billed outputs
        n = req.body.get(name)
        if scope.max_n is not None and _int(n) and n > scope.max_n:
            raise bad_request(
                f"`{name}` is {n}; this key allows at most {scope.max_n}.",
                param=name,
                code="above_key_limit",
            )
    cap = scope.max_output_tokens
    if cap is not None:
        for name in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
            value = req.body.get(name)
            if _int(value) and value > cap:
                raise bad_request(
                    f"`{name}` is {value}; this key allows at most {cap} output tokens.",
                    param=name,
                    code="above_key_limit",
                )
        field = OUTPUT_LIMIT_FIELD.get(endpoint)
        if req.max_tokens is None and field is not None:
            # no limit named: the upstream's default is the model's whole output window,
            # so the key's cap is sent
            return dataclasses.replace(req, body={**req.body, field: cap}, max_tokens=cap)
    return req


def _int(value: object) -> TypeGuard[int]:
    # validation has already refused other types; bool is an int to Python, not to JSON
    return isinstance(value, int) and not isinstance(value, bool)


def _not_allowed(name: str, param: str, allowed: frozenset[str]) -> OpenAIError:
    names = sorted(allowed)
    shown = ", ".join(names[:_LISTED]) + (", ..." if len(names) > _LISTED else "")
    # OpenAI answers a model outside a project's scope with 403 and this type
    return OpenAIError(
        403,
        f"This key may not use the model {name[:80]!r} (it may use: {shown}).",
        code="model_not_allowed",
        param=param,
        type_="invalid_request_error",
    )

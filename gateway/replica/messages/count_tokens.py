"""`POST /v1/messages/count_tokens`: Anthropic's token count of a Messages body, answered
by the gateway itself, `{"input_tokens": N}`.

Clients (Claude Code among them) ask it before they send, to see how full the context
is. The gateway counts offline (`gateway.domain.token_estimate`: OpenAI's encodings, an
estimate for other vendors' models) the system prompt, the turns and the tools, as the
worst case of a Messages request counts them. Anthropic does not bill this call and
nothing goes upstream, so like `/v1/models` it leaves no ledger row and takes nothing
from budgets or rate limits. It wants a gateway key (`x-api-key` or Bearer) allowed the
model, and a model the gateway serves.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError, bad_request
from gateway.domain.token_estimate import estimate_prompt_tokens
from gateway.providers.anthropic_requests import estimate_messages
from gateway.replica.chat_request import parse_json_body
from gateway.replica.key_scope import check_request
from gateway.replica.messages.errors import error_response
from gateway.replica.messages.request import validate_messages_request
from gateway.replica.messages.route import authorization
from gateway.replica.request_body import read_body
from gateway.replica.service import GatewayService


def count_input_tokens(body: dict[str, Any], upstream_model: str | None) -> int:
    """The system prompt, the turns and the tool definitions of a Messages body."""
    prompt = estimate_messages(body)
    tools = body.get("tools")
    if tools:
        prompt.append({"role": "system", "content": json.dumps(tools)})
    return estimate_prompt_tokens(prompt, upstream_model)


class CountTokensRoute:
    def __init__(self, service: GatewayService) -> None:
        self.service = service

    async def __call__(self, request: Request) -> Response:
        svc = self.service
        try:
            caller = await svc.keys.identify(authorization(request))
            limit = svc.cfg.gateway.max_body_bytes
            body = parse_json_body(await read_body(request, limit), limit)
            if not isinstance(body, dict):
                raise bad_request("The request body must be a JSON object.")
            # the fields a count reads, checked as for a Messages request (it has no
            # max_tokens and no stream of its own)
            req = validate_messages_request({**body, "max_tokens": 1, "stream": False})
            check_request(caller.scope, req, request.headers, Endpoint.MESSAGES)
            model = svc.cfg.models_by_name.get(req.model)
            alias = svc.cfg.aliases.get(req.model)
            if model is None and alias is None:
                raise OpenAIError(404, f"model: {req.model[:80]!r} is not served here.",
                                  param="model", code="model_not_found")
            upstream = model.upstream_model if model is not None else None
            return JSONResponse({"input_tokens": count_input_tokens(body, upstream)})
        except OpenAIError as err:
            return error_response(err)

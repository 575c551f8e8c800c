"""The /_sim control API: faults and behaviour at run time, counters, reset."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.devtools.sim import bodies
from gateway.devtools.sim.request import InvalidRequest
from gateway.devtools.sim.responses import JSON
from gateway.devtools.sim.settings import FAULT_KINDS, BehaviourOverride, FaultSpec
from gateway.devtools.sim.state import sim_state


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    return body


def _control_error(err: Exception) -> Response:
    if isinstance(err, ValidationError):
        message = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
    else:
        message = str(err)
    return Response(bodies.error_body(message, "invalid_request_error"), 400,
                    media_type=JSON)


async def faults(request: Request) -> Response:
    state = sim_state(request)
    if request.method == "PUT":
        try:
            body = await _json_body(request)
            model, kind = body.pop("model", None), body.pop("kind", None)
            if not isinstance(model, str) or kind not in FAULT_KINDS:
                raise InvalidRequest(f"need a model and a kind, one of {', '.join(FAULT_KINDS)}")
            state.faults.set(model, kind, FaultSpec(**body))
        except (InvalidRequest, ValidationError, TypeError) as err:
            return _control_error(err)
    elif request.method == "DELETE":
        state.faults.clear(request.query_params.get("model"), request.query_params.get("kind"))
    return JSONResponse({"faults": state.faults.snapshot()})


async def behaviour(request: Request) -> Response:
    state = sim_state(request)
    if request.method == "PUT":
        try:
            body = await _json_body(request)
            model = body.pop("model", None)
            if not isinstance(model, str):
                raise InvalidRequest("need a model")
            state.override(model, BehaviourOverride(**body))
        except (InvalidRequest, ValidationError, TypeError) as err:
            return _control_error(err)
    elif request.method == "DELETE":
        model = request.query_params.get("model")
        for name in [model] if model else list(state.overrides):
            state.override(name, None)
    models = sorted(set(state.model_ids) | set(state.overrides))
    return JSONResponse({"default": state.settings.default.model_dump(),
                         "models": {m: state.behaviour(m).model_dump() for m in models}})


async def stats(request: Request) -> Response:
    state = sim_state(request)
    return JSONResponse(state.stats.snapshot(state.connections_open()))


async def recent_requests(request: Request) -> Response:
    return JSONResponse({"requests": list(sim_state(request).stats.recent)})


async def reset(request: Request) -> Response:
    state = sim_state(request)
    state.reset()
    # the batch store's settings back to the configured ones, its counters to zero
    request.app.state.sim_batches.reset(state.settings.batches.delay_s,
                                        state.settings.batches.failed_custom_ids)
    return JSONResponse({"reset": True})

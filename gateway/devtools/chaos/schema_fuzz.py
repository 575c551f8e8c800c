"""Scenario 1: schemathesis against the gateway's own OpenAPI schema; no answer may be 5xx.

FastAPI serves the schema at /openapi.json (checked first; generated from
`gateway.replica.http_api`'s app when the route is not there). The chat route reads its
raw body itself, so the schema describes no body for it: the OpenAI request shape is
added here, or the fuzzer would only ever send an empty POST. Positive cases keep `n`
and `max_tokens` small, so the valid ones cost the sim little; negative cases go anywhere.
"""

from __future__ import annotations

import collections
import copy
import time
from typing import Any

import httpx

from gateway.devtools.chaos.bookkeeping import Context, expect, expect_intact, finish, utcnow
from gateway.devtools.chaos.load import CLIENT_ID_HEADER, REQUEST_ID_HEADER, Outcome
from gateway.devtools.chaos.report import ScenarioResult

CHAT_PATH = "/v1/chat/completions"
# every route that records usage: each of their answers with an id has its one row
RECORDING_PATHS = frozenset(
    {CHAT_PATH, "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages"}
)
CHAT_REQUEST: dict[str, Any] = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "enum": ["gpt-4o-mini", "fast", "deepseek-v3.2", "nope"]},
        "messages": {
            "type": "array",
            "minItems": 1,
            "maxItems": 4,
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "properties": {
                    "role": {"type": "string", "enum": ["system", "user", "assistant"]},
                    "content": {"type": "string", "maxLength": 200},
                },
            },
        },
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": 32},
        "n": {"type": "integer", "minimum": 1, "maximum": 3},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "stream": {"type": "boolean"},
        "user": {"type": "string", "maxLength": 64},
    },
}


def fetch_schema(
    gateway_url: str, cfg_path: str, headers: dict[str, str] | None = None
) -> tuple[dict[str, Any], str]:
    """The served schema (it wants a gateway key: `headers`), or the app's own when it is
    not served; and which it was."""
    try:
        resp = httpx.get(f"{gateway_url}/openapi.json", timeout=10, headers=headers)
        if resp.status_code == 200:
            return resp.json(), "served at /openapi.json"
        how = f"/openapi.json answered {resp.status_code}: generated from the app"
    except httpx.HTTPError as err:
        how = f"/openapi.json unreachable ({type(err).__name__}): generated from the app"
    from gateway.domain.config import load_config
    from gateway.replica.http_api import build_app
    from gateway.replica.service import GatewayService

    return build_app(GatewayService(load_config(cfg_path))).openapi(), how


def with_chat_body(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with the chat request body and bearer auth described."""
    out = copy.deepcopy(schema)
    post = out.setdefault("paths", {}).setdefault(CHAT_PATH, {}).setdefault("post", {})
    post["requestBody"] = {"required": True,
                           "content": {"application/json": {"schema": CHAT_REQUEST}}}
    out.setdefault("components", {})["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer"}
    }
    out["security"] = [{"bearer": []}]
    return out


def fuzz(schema: dict[str, Any], base_url: str, headers: dict[str, str], examples: int,
         prefix: str) -> tuple[list[Outcome], collections.Counter[str]]:
    """Every operation, positive and negative cases, `examples` of each; one Outcome each."""
    import hypothesis
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis.core.result import Ok

    loaded = schemathesis.openapi.from_dict(schema)
    outcomes: list[Outcome] = []
    per_status: collections.Counter[str] = collections.Counter()
    for result in loaded.get_all_operations():
        if not isinstance(result, Ok):
            continue  # an operation schemathesis cannot read: nothing to send it
        operation = result.ok()
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):

            @settings(max_examples=examples, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck),
                      phases=[Phase.generate], derandomize=False)  # fmt: skip
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case: Any) -> None:
                kind = "rec" if case.path in RECORDING_PATHS else "other"
                client_id = f"{prefix}-{kind}-{len(outcomes)}"
                t0 = time.time()
                status, rid, error = None, None, None
                try:
                    resp = case.call(base_url=base_url, timeout=30,
                                     headers={**headers, CLIENT_ID_HEADER: client_id})
                    status, rid = resp.status_code, resp.headers.get(REQUEST_ID_HEADER)
                except Exception as err:  # noqa: BLE001 - no answer is itself a finding
                    error = type(err).__name__
                outcomes.append(Outcome(client_id, t0, time.time(), status,
                                        rid[0] if isinstance(rid, list) else rid, error=error))
                per_status[f"{case.method} {case.path} {status}"] += 1

            try:
                call()
            except hypothesis.errors.Unsatisfiable:
                continue  # a case kind this operation cannot have (no body to break)
    return outcomes, per_status


def run(ctx: Context) -> ScenarioResult:
    name = "schemathesis"
    started, since = time.monotonic(), utcnow()
    auth = {"Authorization": f"Bearer {ctx.key(name)}"}
    schema, how = fetch_schema(ctx.stack.gateway_url, str(ctx.stack.config_path), auth)
    outcomes, per_status = fuzz(with_chat_body(schema), ctx.stack.gateway_url, auth,
                                ctx.sizes.fuzz_examples, name)  # fmt: skip
    # only the model APIs record usage: the other routes' answers have no row to match
    chat = [o for o in outcomes if o.client_id.startswith(f"{name}-rec-")]
    result, acc = finish(ctx, name, chat, since, started, settle_s=20)
    result.sent = len(outcomes)
    result.answered_2xx = sum(1 for o in outcomes if o.answered_2xx)
    result.answered_4xx = sum(1 for o in outcomes if o.status and 400 <= o.status < 500)
    result.answered_5xx = sum(1 for o in outcomes if o.status and o.status >= 500)
    result.no_answer = sum(1 for o in outcomes if o.status is None)
    ops = sorted(schema.get("paths", {}))
    result.notes.insert(0, f"schema {how}: {len(ops)} paths ({', '.join(ops)}); "
                           f"{len(chat)} of the {len(outcomes)} requests were on the model APIs, "
                           "the routes that record; rows are counted for those")
    five = {k: v for k, v in per_status.items() if k.rsplit(" ", 1)[-1].startswith("5")}
    if five:
        result.notes.append(f"5xx answers: {dict(five)}")
    expect(result, result.answered_5xx == 0, f"{result.answered_5xx} answers were 5xx")
    expect(result, result.no_answer == 0, f"{result.no_answer} requests got no answer")
    expect_intact(result, acc)
    return result

"""A finished batch's results as ledger rows and as the files the app reads. Pure.

Each line the app sent becomes one `UsageRecord` (endpoint `batch`), whatever became of
it: answered lines priced at the provider's batch rate (`pricing.py`), failed, cancelled
or expired lines as upstream errors with no bill. Its request id is derived from the
batch id and the line's custom id, so a batch finished twice (two replicas, a retried
round) names the very same rows and the ledger keeps one of each.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from gateway.domain.config import Config
from gateway.domain.endpoints import Endpoint
from gateway.domain.pricing import PriceCatalog, PriceUnavailable, TokenUsage
from gateway.domain.usage_record import (
    RequestStatus,
    UsageRecord,
    UsageSource,
    measured_fields,
)
from gateway.providers.anthropic_replies import usage_from_anthropic
from gateway.providers.openai import usage_from_openai

from .pricing import at_batch_rate

# fixed forever: changing it would change every batch line's request id
BATCH_LINE_NAMESPACE = uuid.UUID("3b1d6c1e-6f0b-4b7a-9d2e-5a4c8f1e0b32")


def line_request_id(batch_id: str, custom_id: str) -> uuid.UUID:
    return uuid.uuid5(BATCH_LINE_NAMESPACE, f"{batch_id}\n{custom_id}")


@dataclasses.dataclass(frozen=True, slots=True)
class LineOutcome:
    """What the provider said of one line: its answer body (None: no answer) and usage."""

    custom_id: str
    answer: dict[str, Any] | None
    usage: TokenUsage | None
    error: str | None  # a short error class when there is no answer


@dataclasses.dataclass(frozen=True, slots=True)
class Finished:
    records: list[UsageRecord]
    output: bytes  # the app's output file (OpenAI) or results (Anthropic), JSONL
    errors: bytes  # OpenAI's error file: the failed lines ("" when none failed)
    billed_usd: Decimal
    list_usd: Decimal
    completed: int
    failed: int


def openai_outcomes(results: Sequence[Mapping[str, Any]]) -> dict[str, LineOutcome]:
    """OpenAI's output and error file lines, by custom id."""
    out: dict[str, LineOutcome] = {}
    for item in results:
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str):
            continue
        response = item.get("response")
        body = response.get("body") if isinstance(response, dict) else None
        ok = isinstance(response, dict) and response.get("status_code") == 200
        if ok and isinstance(body, dict):
            out[custom_id] = LineOutcome(custom_id, body, usage_from_openai(body.get("usage")),
                                         None)  # fmt: skip
        else:
            out[custom_id] = LineOutcome(custom_id, None, None, "batch_line_failed")
    return out


def anthropic_outcomes(results: Sequence[Mapping[str, Any]]) -> dict[str, LineOutcome]:
    """Anthropic's results lines (`{custom_id, result: {type, message | error}}`)."""
    out: dict[str, LineOutcome] = {}
    for item in results:
        custom_id, result = item.get("custom_id"), item.get("result")
        if not isinstance(custom_id, str) or not isinstance(result, dict):
            continue
        message = result.get("message")
        if result.get("type") == "succeeded" and isinstance(message, dict):
            out[custom_id] = LineOutcome(custom_id, message,
                                         usage_from_anthropic(message.get("usage")), None)
        else:
            out[custom_id] = LineOutcome(custom_id, None, None,
                                         f"batch_line_{result.get('type', 'failed')}")
    return out


def finish(
    batch: Mapping[str, Any],
    outcomes: Mapping[str, LineOutcome],
    cfg: Config,
    catalog: PriceCatalog,
    factor: Decimal,
    now: dt.datetime,
) -> Finished:
    """Every line of `batch` (its row) as a record, and the app's files."""
    records: list[UsageRecord] = []
    output: list[str] = []
    errors: list[str] = []
    billed = listed = Decimal(0)
    completed = failed = 0
    for line in batch["lines"]:
        custom_id, requested, model = line["custom_id"], line["requested"], line["model"]
        outcome = outcomes.get(custom_id) or LineOutcome(custom_id, None, None,
                                                         "batch_line_expired")
        record = _record(batch, custom_id, requested, model, outcome, cfg, catalog, factor, now)
        records.append(record)
        if record.actual_cost_usd is not None and record.list_cost_usd is not None:
            billed += record.actual_cost_usd
            listed += record.list_cost_usd
        if outcome.answer is not None:
            completed += 1
            output.append(_output_line(batch, record, outcome.answer, requested, custom_id))
        else:
            failed += 1
            line_out = _error_line(batch, record, outcome)
            (errors if batch["api"] == "openai" else output).append(line_out)
    return Finished(records, _jsonl(output), _jsonl(errors), billed, listed, completed, failed)


def _jsonl(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


def _record(batch: Mapping[str, Any], custom_id: str, requested: str, model: str,
            outcome: LineOutcome, cfg: Config, catalog: PriceCatalog, factor: Decimal,
            now: dt.datetime) -> UsageRecord:  # fmt: skip
    alias = requested if requested in cfg.aliases else None
    baseline = cfg.aliases[alias].baseline if alias else None
    usage = outcome.usage
    priced = None
    if outcome.answer is not None and usage is not None:
        try:
            priced = at_batch_rate(catalog.price(model, usage, baseline_model=baseline), factor)
        except PriceUnavailable:
            priced = None  # unknown, never $0
    answered = outcome.answer is not None
    started: dt.datetime = batch["created_at"]
    source = UsageSource.PROVIDER if usage is not None else UsageSource.MISSING
    return UsageRecord(
        request_id=line_request_id(batch["id"], custom_id),
        started_at=started,
        ended_at=now,
        app=batch["app"],
        team=batch["team"],
        key_id=batch["key_id"],
        requested_model=requested[:200],
        alias=alias,
        model=model,
        provider=batch["provider"],
        stream=False,
        status=RequestStatus.OK if answered else RequestStatus.UPSTREAM_ERROR,
        http_status=200 if answered else 502,
        error_class=None if answered else outcome.error,
        usage_source=source,
        latency_ms=max(0, int((now - started).total_seconds() * 1000)),
        ttft_ms=None,
        upstream_latency_ms=None,
        attempts=1,
        fallback_path=(model,),
        routing_policy="batch",
        endpoint=Endpoint.BATCH,
        **measured_fields(usage, priced, baseline),
    )


def _output_line(batch: Mapping[str, Any], record: UsageRecord, answer: dict[str, Any],
                 requested: str, custom_id: str) -> str:  # fmt: skip
    body = {**answer, "model": requested}  # as a live answer names it: what the app asked for
    if batch["api"] == "anthropic":
        return json.dumps({"custom_id": custom_id,
                           "result": {"type": "succeeded", "message": body}})  # fmt: skip
    return json.dumps({
        "id": f"batch_req_{record.request_id.hex}", "custom_id": custom_id,
        "response": {"status_code": 200, "request_id": str(record.request_id), "body": body},
        "error": None,
    })


def _error_line(batch: Mapping[str, Any], record: UsageRecord, outcome: LineOutcome) -> str:
    kind = (outcome.error or "failed").removeprefix("batch_line_")
    if batch["api"] == "anthropic":
        result: dict[str, Any] = {"type": kind if kind in ("canceled", "expired") else "errored"}
        if result["type"] == "errored":
            result["error"] = {"type": "error", "error": {
                "type": "api_error", "message": "The provider did not answer this request."}}
        return json.dumps({"custom_id": outcome.custom_id, "result": result})
    return json.dumps({
        "id": f"batch_req_{record.request_id.hex}", "custom_id": outcome.custom_id,
        "response": None,
        "error": {"code": kind, "message": "The provider did not answer this request."},
    })



def ledger_values(record: UsageRecord) -> dict[str, Any]:
    """A record as `usage_records` column values (the names are the record's fields)."""
    out: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(record, name)
        if isinstance(value, Endpoint | RequestStatus | UsageSource):
            value = value.value
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


_FIELDS = tuple(f.name for f in dataclasses.fields(UsageRecord))

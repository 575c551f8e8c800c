"""Acceptance: the official openai SDK, unchanged, against the deployed gateway (Ray Serve,
`costgate up`) on the sim, with the ledger in PostgreSQL. Embeddings, Responses (plain and
streamed) and legacy completions each parse in the SDK, carry `x-costgate-request-id`, and
leave one row whose token counts are the usage the SDK reports, priced class by class."""

from __future__ import annotations

import time
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import openai
import pytest
from sqlalchemy import create_engine, text

from gateway.domain.pricing import TOKEN_CLASSES, PriceCatalog, TokenUsage

pytestmark = pytest.mark.ray
Q = Decimal("1e-10")


def sdk(gateway: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=gateway.api_key,
                         max_retries=0, timeout=60)


def ledger_row(gateway: Any, request_id: str, timeout: float = 60.0) -> dict[str, Any]:
    engine = create_engine(gateway.database_url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                rows = conn.execute(
                    text("SELECT r.*, v.id AS version_row FROM usage_records r LEFT JOIN "
                         "price_versions v ON v.id = r.price_version_id "
                         "WHERE r.request_id = CAST(:id AS uuid)"), {"id": request_id},
                ).mappings().all()
            if rows:
                assert len(rows) == 1
                return dict(rows[0])
            time.sleep(0.3)
    finally:
        engine.dispose()
    raise AssertionError(f"no ledger row for {request_id}")


def assert_priced_by_class(gateway: Any, row: dict[str, Any]) -> dict[str, Decimal]:
    """The row's costs are the sum of its token classes at its price version's rates."""
    catalog = PriceCatalog.from_config(gateway.cfg)
    version = catalog.version(row["model"])
    assert version is not None and row["price_version_id"] == version.id
    assert row["version_row"] == version.id  # the version is in the ledger's price table
    usage = TokenUsage(
        prompt_tokens=row["prompt_tokens"],
        cached_prompt_tokens=row["cached_prompt_tokens"] or 0,
        completion_tokens=row["completion_tokens"] or 0,
        reasoning_tokens=row["reasoning_tokens"] or 0,
        cache_write_tokens=row["cache_write_tokens"] or 0,
    )
    listed = version.list_rates.class_costs(usage)
    billed = version.billed_rates.class_costs(usage)
    assert tuple(listed) == TOKEN_CLASSES
    assert row["list_cost_usd"] == sum(listed.values()).quantize(Q, ROUND_HALF_EVEN)
    assert row["actual_cost"] == sum(billed.values()).quantize(Q, ROUND_HALF_EVEN)
    assert row["list_cost_usd"] > 0
    return listed


def test_embeddings_through_serve(gateway, sim):
    raw = sdk(gateway).embeddings.with_raw_response.create(
        model="text-embedding-3-small", input=["first text", "second, longer text"])
    reply = raw.parse()  # the SDK asks for base64 and decodes it
    assert len(reply.data) == 2 and len(reply.data[0].embedding) == 1536
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert row["endpoint"] == "embeddings" and row["status"] == "ok"
    assert row["prompt_tokens"] == reply.usage.prompt_tokens
    assert row["completion_tokens"] == 0
    classes = assert_priced_by_class(gateway, row)
    assert classes["input"] > 0 and all(classes[c] == 0 for c in TOKEN_CLASSES[1:])


def test_a_response_through_serve(gateway, sim):
    raw = sdk(gateway).responses.with_raw_response.create(
        model="gpt-4.1", input="Summarise the quarter.", instructions="Three bullets.")
    reply = raw.parse()
    assert reply.status == "completed" and reply.output_text and reply.model == "gpt-4.1"
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert row["endpoint"] == "responses" and not row["stream"]
    assert row["prompt_tokens"] == reply.usage.input_tokens
    assert row["cached_prompt_tokens"] == reply.usage.input_tokens_details.cached_tokens
    assert row["completion_tokens"] == reply.usage.output_tokens
    assert row["reasoning_tokens"] == reply.usage.output_tokens_details.reasoning_tokens
    classes = assert_priced_by_class(gateway, row)
    assert classes["input"] > 0 and classes["output"] > 0


def test_a_streamed_response_through_serve(gateway, sim):
    with sdk(gateway).responses.with_streaming_response.create(
        model="gpt-4.1-mini", input="Tell me about ledgers.", stream=True
    ) as raw:
        request_id = raw.headers["x-costgate-request-id"]
        events = list(raw.parse())
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    usage = events[-1].response.usage
    row = ledger_row(gateway, request_id)
    assert row["endpoint"] == "responses" and row["stream"] and row["status"] == "ok"
    assert row["prompt_tokens"] == usage.input_tokens
    assert row["completion_tokens"] == usage.output_tokens
    assert row["reasoning_tokens"] == usage.output_tokens_details.reasoning_tokens
    assert row["usage_source"] == "provider" and row["ttft_ms"] is not None
    assert_priced_by_class(gateway, row)


def test_a_legacy_completion_through_serve(gateway, sim):
    raw = sdk(gateway).completions.with_raw_response.create(
        model="gpt-4o-mini", prompt="The ledger says", max_tokens=16)
    reply = raw.parse()
    assert reply.object == "text_completion" and reply.choices[0].text
    row = ledger_row(gateway, raw.headers["x-costgate-request-id"])
    assert row["endpoint"] == "completions"
    assert (row["prompt_tokens"], row["completion_tokens"]) == (
        reply.usage.prompt_tokens, reply.usage.completion_tokens)
    assert_priced_by_class(gateway, row)


def test_a_streamed_legacy_completion_through_serve(gateway, sim):
    with sdk(gateway).completions.with_streaming_response.create(
        model="gpt-4o-mini", prompt="Once", stream=True, stream_options={"include_usage": True}
    ) as raw:
        request_id = raw.headers["x-costgate-request-id"]
        chunks = list(raw.parse())
    usage = chunks[-1].usage
    assert usage is not None and "".join(c.choices[0].text for c in chunks if c.choices)
    row = ledger_row(gateway, request_id)
    assert row["endpoint"] == "completions" and row["stream"]
    assert (row["prompt_tokens"], row["completion_tokens"]) == (
        usage.prompt_tokens, usage.completion_tokens)
    assert_priced_by_class(gateway, row)

"""What the writer's and the spool's tests share: a realistic record, and ways to look at
the ledger table and the spool directory while a writer works."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from gateway.domain.usage_record import RequestStatus, UsageRecord, UsageSource

T0 = dt.datetime(2026, 11, 3, 12, 0, tzinfo=dt.UTC)
ROOT = Path(__file__).resolve().parents[3]


def make_record(**overrides: Any) -> UsageRecord:
    fields: dict[str, Any] = {
        "request_id": uuid.uuid4(),
        "started_at": T0,
        "ended_at": T0 + dt.timedelta(milliseconds=850),
        "app": "checkout",
        "team": "payments",
        "key_id": uuid.uuid4(),
        "requested_model": "auto",
        "alias": "auto",
        "model": "deepseek-v3.2",
        "provider": "deepseek",
        "stream": True,
        "status": RequestStatus.OK,
        "http_status": 200,
        "error_class": None,
        "prompt_tokens": 1200,
        "cached_prompt_tokens": 200,
        "completion_tokens": 300,
        "reasoning_tokens": 0,
        "usage_source": UsageSource.PROVIDER,
        "latency_ms": 850,
        "ttft_ms": 180,
        "upstream_latency_ms": 840,
        "attempts": 2,
        "fallback_path": ("gemini-2.5-flash", "deepseek-v3.2"),
        "routing_policy": "weighted",
        "price_version_id": uuid.uuid4(),  # no such version: the row must still be kept
        "billing_currency": "USD",
        "actual_cost": Decimal("0.0004116000"),
        "actual_cost_usd": Decimal("0.0004116000"),
        "list_cost_usd": Decimal("0.0004116000"),
        "baseline_model": "gpt-4.1",
        "baseline_cost_usd": Decimal("0.0045000000"),
    }
    fields.update(overrides)
    return UsageRecord(**fields)


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def row_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM usage_records")).scalar_one())


def distinct_ids(engine: Engine) -> int:
    with engine.connect() as conn:
        q = text("SELECT count(DISTINCT request_id) FROM usage_records")
        return int(conn.execute(q).scalar_one())


def spool_lines(spool_dir: Path) -> int:
    return sum(
        len(p.read_text().splitlines()) for p in spool_dir.glob("usage-*.jsonl") if p.exists()
    )


async def dead_pid() -> int:
    proc = await asyncio.create_subprocess_exec("true")
    await proc.wait()
    return proc.pid

"""Ledger rows with end users, sessions and tags, written through the real writer (so the
statement trigger folds them into every rollup): what the usage API, report, FOCUS and
rollup tests of attribution share. Every dimension varies and NULLs appear where real
rows have them (no end user, no tags, unknown cost, failures, embeddings)."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from decimal import Decimal

from sqlalchemy import Engine, text

from gateway.domain.endpoints import Endpoint
from gateway.domain.usage_record import RequestStatus, UsageRecord
from gateway.ledger.database import LedgerDatabase
from tests.gateway.ledger.support import make_record

END = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)  # the rows fall on the 3 days before
START = END - dt.timedelta(days=3)
USERS = tuple(f"user-{i}" for i in range(7))
FEATURES = ("search", "chat", "summarize")
KEYS = tuple(uuid.UUID(int=i + 1) for i in range(3))


def attributed(i: int) -> UsageRecord:
    at = END - dt.timedelta(minutes=37 * i + 5)
    failed = i % 17 == 0
    tags: dict[str, str] | None = {"feature": FEATURES[i % 3], "env": ("prod", "dev")[i % 2]}
    if i % 5 == 0:
        tags = None
    elif i % 7 == 0:
        tags = {"feature": FEATURES[i % 3]}
    return make_record(
        started_at=at,
        ended_at=at + dt.timedelta(milliseconds=400),
        app=("search", "support", "checkout")[i % 3],
        team=None if i % 4 == 0 else ("payments", "growth")[i % 2],
        key_id=KEYS[i % 3],
        model=("deepseek-v3.2", "gpt-4.1")[i % 2],
        provider=("deepseek", "openai")[i % 2],
        endpoint=Endpoint.EMBEDDINGS if i % 9 == 0 else Endpoint.CHAT_COMPLETIONS,
        status=RequestStatus.UPSTREAM_ERROR if failed else RequestStatus.OK,
        http_status=502 if failed else 200,
        error_class="upstream_5xx" if failed else None,
        prompt_tokens=None if failed else 1000 + i,
        cached_prompt_tokens=None if failed else i,
        completion_tokens=None if failed else 10 * i,
        actual_cost=None if failed or i % 11 == 0 else Decimal(i) / Decimal(10**7),
        actual_cost_usd=None if failed or i % 11 == 0 else Decimal(i) / Decimal(10**7),
        list_cost_usd=None if failed else Decimal(i) / Decimal(10**6),
        cache_hit=i % 13 == 0,
        end_user=None if i % 6 == 0 else USERS[(i * 5) % len(USERS)],
        session_id=None if i % 4 == 0 else f"s-{i % 10}",
        tags=tags,
    )


def write_attributed(url: str, n: int = 110) -> list[UsageRecord]:
    """`n` rows over the 3 days before END, in two batches (two trigger firings)."""
    rows = [attributed(i) for i in range(n)]

    async def go() -> None:
        db = LedgerDatabase(url, write_timeout_s=30, connect_timeout_s=5)
        try:
            for batch in (rows[: n // 2], rows[n // 2 :]):
                assert await db.write(batch) == []
        finally:
            await db.close()

    asyncio.run(go())
    return rows


def reopen_days(engine: Engine, since: dt.datetime) -> None:
    """The state of a ledger whose end users by kind are closed before `since` only (a UTC
    midnight): the later days' rows out of that rollup, as if no close had reached them
    (tests that do this take the `reopens_days` fixture)."""
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE usage_rollup_state SET user_kinds_closed_before = :d"), {"d": since}
        )
        conn.execute(
            text("DELETE FROM usage_rollup_user_kind_daily WHERE bucket >= :d"), {"d": since}
        )

"""Erasing an end user: every row that named them carries a tombstone instead, nothing
else moves (the app and day totals stay exact to the last digit), and it is audited
without the id. Rows are written by the real ledger writer, so the rollups are the ones
the triggers keep."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import uuid
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, text

from db.analytics.rollups import rebuild_all
from db.budgets import set_budget
from db.end_users import forget_end_user
from gateway.attribution.identity import EndUserIds
from gateway.domain.budgets import BudgetPeriod, BudgetScope
from gateway.domain.usage_record import RequestStatus, UsageRecord
from gateway.ledger.database import LedgerDatabase
from tests.gateway.ledger.support import make_record

DAY0 = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.UTC)
PEOPLE = ("alice", "bob", None)  # None: rows without an end user


@pytest.fixture
def ledger(ledger_engine: Engine, clean_ledger: None) -> Engine:
    with ledger_engine.begin() as conn:  # not among the shared fixture's tables
        conn.execute(text("TRUNCATE end_user_erasures RESTART IDENTITY"))
    return ledger_engine


def seed_records(ids: EndUserIds) -> list[UsageRecord]:
    """Three people over four days and two apps, with sessions, tags, odd amounts and some
    unknown costs, so a sum that moved by one row or one digit shows."""
    out = []
    for i in range(72):
        person = PEOPLE[i % 3]
        failed = i % 7 == 0
        cost = None if failed or i % 10 == 3 else Decimal(i * 7919 + 13) / Decimal(10**9)
        out.append(
            make_record(
                request_id=uuid.uuid4(),
                started_at=DAY0 + dt.timedelta(days=i % 4, hours=i % 5, minutes=i),
                app=("checkout", "search")[i // 4 % 2],
                team=("payments", None)[i // 4 % 2],
                status=RequestStatus.UPSTREAM_ERROR if failed else RequestStatus.OK,
                prompt_tokens=100 + i,
                cached_prompt_tokens=i % 4 * 10,
                completion_tokens=30 + 2 * i,
                actual_cost=cost,
                actual_cost_usd=cost,
                list_cost_usd=None if cost is None else cost * 3 + Decimal("0.0000000007"),
                cache_hit=i % 9 == 0,
                end_user=None if person is None else ids.stored(person),
                session_id=None if i % 4 == 1 else f"s{i % 6}",
                tags={"feature": ("chat", "search")[i % 2], "n": str(i % 3)},
            )
        )
    return out


def write_records(url: str, records: list[UsageRecord]) -> None:
    async def go() -> None:
        db = LedgerDatabase(url, write_timeout_s=30, connect_timeout_s=5)
        try:
            for start in range(0, len(records), 25):  # several statements, several folds
                assert await db.write(records[start : start + 25]) == []
        finally:
            await db.close()

    asyncio.run(go())


def _rows(engine: Engine, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    # counts come back as int from one side and Decimal from a sum: compare as Decimal
    with engine.connect() as conn:
        rows = conn.execute(text(sql), params)
        return sorted(
            (tuple(Decimal(v) if isinstance(v, int) else v for v in r) for r in rows), key=repr
        )


MEASURES = (
    "sum(requests), sum(prompt_tokens), sum(cached_prompt_tokens), sum(completion_tokens),"
    " sum(actual_cost_usd), sum(list_cost_usd), sum(savings_usd)"
)
RAW_MEASURES = (
    "count(*), sum(prompt_tokens), sum(cached_prompt_tokens), sum(completion_tokens),"
    " sum(actual_cost_usd), sum(list_cost_usd), sum(list_cost_usd - actual_cost_usd)"
)
BY_APP_DAY = "GROUP BY app, team, d"


def _totals(engine: Engine) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Per app and day: from the cube's day rollup, and from the raw rows."""
    rollup = _rows(
        engine,
        f"SELECT app, team, (bucket AT TIME ZONE 'UTC')::date d, {MEASURES}"
        f" FROM usage_rollup_daily {BY_APP_DAY}",
    )
    raw = _rows(
        engine,
        f"SELECT app, team, (started_at AT TIME ZONE 'UTC')::date d, {RAW_MEASURES}"
        f" FROM usage_records {BY_APP_DAY}",
    )
    return rollup, raw


USER_ROLLUP = "SELECT * FROM usage_rollup_user_daily WHERE end_user = :u"
SESSION_ROLLUP = "SELECT * FROM usage_rollup_session_daily WHERE end_user = :u"
KIND_ROLLUP = "SELECT * FROM usage_rollup_user_kind_daily WHERE end_user = :u"
RAW = "SELECT request_id, app, started_at, actual_cost_usd FROM usage_records WHERE end_user = :u"


def _everything_of(engine: Engine, who: str) -> dict[str, list[tuple[Any, ...]]]:
    """The rows naming `who`, without the name (so a renamed row compares equal)."""
    out = {}
    for name, sql in (
        ("user", USER_ROLLUP),
        ("session", SESSION_ROLLUP),
        ("kind", KIND_ROLLUP),
        ("raw", RAW),
    ):
        out[name] = [tuple(v for v in r if v != who) for r in _rows(engine, sql, u=who)]
    return out


def _assert_erased(
    engine: Engine, ids: EndUserIds, database_url: str
) -> tuple[dict[str, list[tuple[Any, ...]]], Any]:
    alice, bob = ids.stored("alice"), ids.stored("bob")
    write_records(database_url, seed_records(ids))
    with engine.begin() as conn:  # an each-user budget's lease held for alice
        conn.execute(
            text(
                "INSERT INTO budget_leases (budget_id, period_start, subject, holder,"
                " held_usd, settled_usd, expires_at) VALUES (:b, :p, :s, 'r1', 0.5, 0.25,"
                " now() + interval '1 minute')"
            ),
            {"b": _each_user_budget(engine), "p": DAY0, "s": alice},
        )
    totals_before = _totals(engine)
    alice_before, bob_before = _everything_of(engine, alice), _everything_of(engine, bob)
    assert all(alice_before.values()) and all(bob_before.values())

    erasure = forget_end_user(engine, alice, actor="dpo@example.com")

    assert erasure.ledger_rows == len(alice_before["raw"]) == 24
    rollups = ("user", "session", "kind")
    assert erasure.rollup_rows == sum(len(alice_before[r]) for r in rollups)
    assert erasure.lease_rows == 1
    assert _everything_of(engine, alice) == {"user": [], "session": [], "kind": [], "raw": []}
    assert _everything_of(engine, erasure.tombstone) == alice_before  # renamed, not changed
    assert _everything_of(engine, bob) == bob_before
    assert _totals(engine) == totals_before
    rollup, raw = totals_before
    assert rollup == raw and len(rollup) == 8  # 2 apps × 4 days, the same on both sides
    leases = _rows(engine, "SELECT subject, held_usd, settled_usd FROM budget_leases")
    assert leases == [(erasure.tombstone, Decimal("0.5"), Decimal("0.25"))]
    return alice_before, erasure


def _each_user_budget(engine: Engine) -> int:
    budget = set_budget(
        engine, BudgetScope.EACH_USER, "checkout", BudgetPeriod.DAY, Decimal("1"), actor="t"
    )
    return budget.id


def test_forgetting_an_end_user_renames_every_row_and_moves_no_total(
    ledger: Engine, database_url: str
) -> None:
    _, erasure = _assert_erased(ledger, EndUserIds(), database_url)
    audit = _rows(ledger, "SELECT row_to_json(e)::text FROM end_user_erasures e")
    assert len(audit) == 1 and "alice" not in audit[0][0]
    (row,) = _rows(
        ledger, "SELECT id, actor, tombstone, ledger_rows, rollup_rows FROM end_user_erasures"
    )
    expected = (erasure.erasure_id, "dpo@example.com", erasure.tombstone, 24, erasure.rollup_rows)
    assert row == expected
    assert erasure.tombstone.startswith("forgotten:")


def test_a_rebuild_after_an_erasure_gives_back_the_renamed_rollups(
    ledger: Engine, database_url: str
) -> None:
    _assert_erased(ledger, EndUserIds(), database_url)
    tables = [f"usage_rollup_{t}_daily" for t in ("user", "session", "user_kind")]
    kept = [_rows(ledger, f"SELECT * FROM {t}") for t in tables]
    assert rebuild_all(ledger) > 0  # from the raw rows, which carry the tombstone too
    assert [_rows(ledger, f"SELECT * FROM {t}") for t in tables] == kept


def test_hashed_ids_are_erased_by_their_stored_form(ledger: Engine, database_url: str) -> None:
    ids = EndUserIds(b"the-hash-secret")
    _assert_erased(ledger, ids, database_url)
    stored = _rows(ledger, "SELECT DISTINCT end_user FROM usage_records ORDER BY 1")
    assert (ids.stored("bob"),) in stored and (ids.stored("alice"),) not in stored


def test_an_unknown_end_user_changes_nothing_but_is_audited(ledger: Engine) -> None:
    erasure = forget_end_user(ledger, "nobody", actor="ops")
    assert (erasure.ledger_rows, erasure.rollup_rows, erasure.lease_rows) == (0, 0, 0)
    assert _rows(ledger, "SELECT count(*) FROM end_user_erasures") == [(1,)]


@pytest.mark.parametrize(
    ("who", "actor", "message"), [("", "ops", "end user"), ("a", " ", "actor")]
)
def test_an_empty_id_or_actor_is_refused(
    ledger: Engine, who: str, actor: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        forget_end_user(ledger, who, actor=actor)
    assert _rows(ledger, "SELECT count(*) FROM end_user_erasures") == [(0,)]


def test_rows_written_during_erasures_keep_raw_rows_and_rollups_in_step(
    ledger: Engine, database_url: str
) -> None:
    """A writer keeps adding alice's rows while she is erased again and again: whatever
    interleaving happens, each name (alice or a tombstone) sums the same in the raw rows
    and in the rollups by end user and by session."""
    batches = [seed_records(EndUserIds())[:12] for _ in range(30)]
    writer = threading.Thread(
        target=write_records, args=(database_url, [r for b in batches for r in b])
    )
    writer.start()
    erasures = 0
    while writer.is_alive() or erasures == 0:
        forget_end_user(ledger, "alice", actor="ops")
        erasures += 1
    writer.join()
    by_name = "SELECT end_user, {m} FROM {t} WHERE end_user IS NOT NULL GROUP BY end_user"
    raw = _rows(ledger, by_name.format(m=RAW_MEASURES, t="usage_records"))
    assert _rows(ledger, by_name.format(m=MEASURES, t="usage_rollup_user_daily")) == raw
    assert sum(r[1] for r in raw) == 30 * 12 * 2 // 3  # alice's and bob's, none lost
    sessions = (
        "SELECT end_user, session_id, {m} FROM {t} WHERE session_id IS NOT NULL"
        " GROUP BY end_user, session_id"
    )
    assert _rows(ledger, sessions.format(m=MEASURES, t="usage_rollup_session_daily")) == _rows(
        ledger, sessions.format(m=RAW_MEASURES, t="usage_records")
    )
    assert _rows(ledger, "SELECT count(*) FROM end_user_erasures") == [(Decimal(erasures),)]


def test_the_end_users_rate_limit_buckets_go_and_no_one_elses(ledger: Engine) -> None:
    key = str(uuid.uuid4())
    names = [
        f"key:{key}:user:alice:rpm",
        f"key:{key}:user:alice:tpm",
        "key:None:user:alice:rpm",  # a static key without an id
        f"key:{key}:user:bob:rpm",
        f"key:{key}:user:x:user:alice:rpm",  # another end user whose id ends like hers
        f"key:{key}:user:alice%:rpm",  # LIKE's wildcard in an id
        f"key:{key}:rpm",
        "model:gpt-4.1:user:alice:rpm",
    ]
    with ledger.begin() as conn:
        for name in names:
            conn.execute(
                text("INSERT INTO limit_buckets (name, level) VALUES (:n, 1)"), {"n": name}
            )
    erasure = forget_end_user(ledger, "alice", actor="ops")
    assert erasure.limit_buckets == 3
    left = [r[0] for r in _rows(ledger, "SELECT name FROM limit_buckets")]
    assert sorted(left) == sorted(names[3:])

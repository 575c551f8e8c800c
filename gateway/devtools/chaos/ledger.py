"""What the clients were told against what the ledger holds, for one scenario's app.

Every scenario sends as an app of its own, so all of that app's rows are its rows. A row
is matched to an answer by the `x-costgate-request-id` the gateway answered with; rows
of requests that never got an answer (the connection died) have no id to match and are
counted apart. The figures:

- lost: answered 2xx whose request id has no row (the one thing finance cannot forgive);
- duplicated: request ids holding more than one row (the primary key forbids it: checked
  all the same), plus rows matching no answered id beyond the number of requests whose
  answer carried no id (only those can explain such rows);
- differing: rows under an answered id that tell another status than the client saw,
  except a stream that broke after its 200 (the client saw the break: an error event or
  a cut connection) whose row says it failed: that row is right, counted as broken_streams;
- missing_error_rows: non-2xx answers with an id but no row (a refusal that should have
  been recorded; auth refusals carry no id and leave no row by design).

`account` is pure; `fetch_rows` and `settle` read the database.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import time
from collections.abc import Callable, Iterable, Sequence

from sqlalchemy import text

from db.engine import make_engine
from gateway.devtools.chaos.load import Outcome


@dataclasses.dataclass(frozen=True)
class Row:
    request_id: str
    http_status: int
    status: str
    started_at: dt.datetime | None = None


@dataclasses.dataclass(frozen=True)
class Accounting:
    sent: int
    answered_2xx: int
    answered_4xx: int
    answered_5xx: int
    no_answer: int
    rows: int
    lost: tuple[str, ...]  # request ids
    duplicated: int
    differing: tuple[str, ...]
    missing_error_rows: tuple[str, ...]
    unmatched_rows: int  # rows whose id no client was given
    broken_streams: int  # streams cut after their 200 whose rows say they failed
    without_id: int  # answers (or failures) that carried no request id

    @property
    def lost_count(self) -> int:
        return len(self.lost)


def account(outcomes: Sequence[Outcome], rows: Sequence[Row]) -> Accounting:
    per_id = collections.Counter(r.request_id for r in rows)
    by_id = {r.request_id: r for r in rows}
    answered_ids = {o.request_id: o for o in outcomes if o.request_id}
    lost = tuple(o.request_id for o in outcomes if o.answered_2xx and o.request_id
                 and o.request_id not in per_id)  # fmt: skip
    # a 2xx without our id cannot be matched: it counts as lost, under its client id
    lost += tuple(f"(no id) {o.client_id}" for o in outcomes if o.answered_2xx and not o.request_id)
    without_id = sum(1 for o in outcomes if not o.request_id)
    unmatched = sum(n for rid, n in per_id.items() if rid not in answered_ids)
    repeated = sum(1 for n in per_id.values() if n > 1)
    other = {rid: o for rid, o in answered_ids.items()
             if rid in by_id and o.status is not None and by_id[rid].http_status != o.status}
    broken = {rid for rid, o in other.items()
              if o.stream and o.error and by_id[rid].http_status >= 400}  # fmt: skip
    differing = tuple(rid for rid in other if rid not in broken)
    missing_errors = tuple(
        rid for rid, o in answered_ids.items() if not o.answered_2xx and rid not in per_id
    )
    return Accounting(
        sent=len(outcomes),
        answered_2xx=sum(1 for o in outcomes if o.answered_2xx),
        answered_4xx=sum(1 for o in outcomes if o.status is not None and 400 <= o.status < 500),
        answered_5xx=sum(1 for o in outcomes if o.status is not None and o.status >= 500),
        no_answer=sum(1 for o in outcomes if o.status is None),
        rows=len(rows),
        lost=lost,
        duplicated=repeated + max(0, unmatched - without_id),
        differing=differing,
        missing_error_rows=missing_errors,
        unmatched_rows=unmatched,
        broken_streams=len(broken),
        without_id=without_id,
    )


_ROWS = text(
    "SELECT request_id::text, http_status, status, started_at FROM usage_records "
    "WHERE app = :app AND started_at >= :since ORDER BY started_at"
)


def fetch_rows(database_url: str, app: str, since: dt.datetime) -> list[Row]:
    """The app's rows from `since` on: the time window guards against an app name reused."""
    engine = make_engine(database_url, pool_size=1, max_overflow=0)
    try:
        with engine.connect() as conn:
            found = conn.execute(_ROWS, {"app": app, "since": since}).all()
    finally:
        engine.dispose()
    return [Row(str(r[0]), int(r[1]), str(r[2]), r[3]) for r in found]


def settle(
    outcomes: Sequence[Outcome],
    read_rows: Callable[[], list[Row]],
    *,
    timeout_s: float,
    poll_s: float = 1.0,
    stable_polls: int = 3,
) -> tuple[Accounting, float]:
    """Account until nothing is lost, or the row count stopped moving, or time is up.

    Rows arrive late on purpose (a flush interval, a spool replay, an orphan adoption),
    so a loss is a loss only once the ledger has had `timeout_s` to catch up; returns the
    accounting and the seconds it took.
    """
    started = time.monotonic()
    last, same = -1, 0
    while True:
        result = account(outcomes, read_rows())
        elapsed = time.monotonic() - started
        same = same + 1 if result.rows == last else 0
        last = result.rows
        caught_up = not result.lost and not result.missing_error_rows and same >= 1
        if caught_up or elapsed >= timeout_s:
            return result, elapsed
        # still losing, but nothing has moved for a while: once the slow paths had time
        if result.lost and same >= stable_polls and elapsed >= timeout_s / 2:
            return result, elapsed
        time.sleep(poll_s)


def merge(parts: Iterable[Sequence[Outcome]]) -> list[Outcome]:
    return [o for part in parts for o in part]

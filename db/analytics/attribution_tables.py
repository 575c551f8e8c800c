"""The daily rollups by end user, tag and session, and the erasure audit, as Core tables
on the ledger's metadata (columns from `db.analytics.attribution_sql`; docs/ROLLUPS.md)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Index, Numeric, Table, Text, func, text

from db.analytics import attribution_sql as a
from db.models import Base


def _table(name: str) -> Table:
    not_null = a.NOT_NULL[name]
    return Table(
        name,
        Base.metadata,
        Column("bucket", DateTime(timezone=True), nullable=False),
        *(Column(d, Text, nullable=d not in not_null) for d in a.DIMENSIONS[name]),
        *(Column(c, BigInteger, nullable=False, server_default=text("0")) for c in a.COUNT_NAMES),
        *(Column(m, Numeric()) for m in a.MONEY_NAMES),
        Index(f"ux_{name}_key", *a.key(name), unique=True, postgresql_nulls_not_distinct=True),
    )


usage_rollup_user_daily = _table(a.USER_TABLE)
usage_rollup_tag_daily = _table(a.TAG_TABLE)
usage_rollup_session_daily = _table(a.SESSION_TABLE)
usage_rollup_user_kind_daily = _table(a.USER_KIND_TABLE)
_kind = usage_rollup_user_kind_daily.c
Index(a.RANK_INDEX, _kind.bucket, _kind.kind, _kind.actual_cost_usd.desc().nulls_last(),
      _kind.requests.desc(), _kind.end_user)  # fmt: skip

# `costgate users forget`: who erased, when, how many rows, the tombstone the rows carry
# now; never the id that was erased
end_user_erasures = Table(
    "end_user_erasures",
    Base.metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("erased_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("actor", Text, nullable=False),
    Column("tombstone", Text, nullable=False),
    Column("ledger_rows", BigInteger, nullable=False),
    Column("rollup_rows", BigInteger, nullable=False),
)

"""The rollup tables as SQLAlchemy Core tables on the ledger's metadata (docs/ROLLUPS.md).

Core tables rather than ORM classes: a rollup row has no identity of its own, and its
key holds NULLs (a request without a team or an alias), so the key is a unique index
with NULLS NOT DISTINCT instead of a primary key; the usage rollups' is (bucket,
group_key), the dimensions' digest (`rollup_sql.GROUP_KEY`, migration 0016). Columns come from
`db.analytics.rollup_sql`, the one definition the trigger's SQL uses as well.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Index,
    Integer,
    Numeric,
    Table,
    Text,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.types import TypeEngine

from db.analytics import latency_sql
from db.analytics.attribution_sql import KINDS_CLOSED_BEFORE
from db.analytics.rollup_sql import (
    COUNTS,
    DIMENSIONS,
    GROUP_KEY,
    LATENCY_DIMENSIONS,
    LATENCY_TABLES,
    MONEY,
    NOT_NULL_DIMENSIONS,
    STATE_TABLE,
    USAGE_TABLES,
    Grain,
    latency_key,
    usage_conflict_key,
)
from db.models import Base

_TYPES: dict[str, TypeEngine[Any]] = {"text": Text(), "uuid": Uuid(), "integer": Integer()}


def _usage_table(grain: Grain) -> Table:
    name = USAGE_TABLES[grain]
    return Table(
        name,
        Base.metadata,
        Column("bucket", DateTime(timezone=True), nullable=False),
        Column(GROUP_KEY, Uuid(), nullable=False),
        *(
            Column(d, _TYPES[t], nullable=d not in NOT_NULL_DIMENSIONS)
            for d, t in DIMENSIONS.items()
        ),
        *(Column(c, BigInteger, nullable=False, server_default=text("0")) for c in COUNTS),
        # unconstrained NUMERIC: a sum of any number of rows stays exact
        *(Column(m, Numeric()) for m in MONEY),
        Index(f"ux_{name}_key", *usage_conflict_key(), unique=True),
    )


def _latency_table(grain: Grain) -> Table:
    name = LATENCY_TABLES[grain]
    return Table(
        name,
        Base.metadata,
        Column("bucket", DateTime(timezone=True), nullable=False),
        *(
            Column(d, _TYPES[t], nullable=d not in ("endpoint", "metric"))
            for d, t in LATENCY_DIMENSIONS.items()
        ),
        Column("requests", BigInteger, nullable=False, server_default=text("0")),
        # requests per bin (rollup_sql.BINS_PER_LN, NBINS): the group's histogram
        Column("bins", ARRAY(BigInteger()), nullable=False),
        Index(
            f"ux_{name}_key",
            *latency_key(),
            unique=True,
            postgresql_nulls_not_distinct=True,
        ),
    )


usage_rollup_hourly = _usage_table("hour")
usage_rollup_daily = _usage_table("day")
latency_rollup_hourly = _latency_table("hour")
latency_rollup_daily = _latency_table("day")

# one row: what maintenance knows about the raw rows (NULL: never pruned)
usage_rollup_state = Table(
    STATE_TABLE,
    Base.metadata,
    Column("id", Boolean, primary_key=True, server_default=text("true")),
    # raw rows started before this were pruned by retention: their rollups are final
    Column("pruned_before", DateTime(timezone=True)),
    # the end users by kind hold the UTC days before this (attribution_sql; NULL: none)
    Column(KINDS_CLOSED_BEFORE, DateTime(timezone=True)),
    CheckConstraint("id", name="single_row"),
)


# the triggers that keep the rollups (migrations 0006, 0015), and what drops them with
# the functions
TRIGGERS_SQL = (
    "CREATE TRIGGER usage_records_rollup_insert AFTER INSERT ON usage_records"
    " REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION usage_rollup_fold()",
    "CREATE TRIGGER usage_records_rollup_delete AFTER DELETE ON usage_records"
    " REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION usage_rollup_unfold()",
    "CREATE TRIGGER usage_records_rollup_truncate AFTER TRUNCATE ON usage_records"
    " FOR EACH STATEMENT EXECUTE FUNCTION usage_rollup_truncate()",
)
DROP_SQL = (
    "DROP TRIGGER IF EXISTS usage_records_rollup_insert ON usage_records",
    "DROP TRIGGER IF EXISTS usage_records_rollup_delete ON usage_records",
    "DROP TRIGGER IF EXISTS usage_records_rollup_truncate ON usage_records",
    "DROP FUNCTION IF EXISTS usage_rollup_fold()",
    "DROP FUNCTION IF EXISTS usage_rollup_unfold()",
    "DROP FUNCTION IF EXISTS usage_rollup_truncate()",
    "DROP FUNCTION IF EXISTS usage_rollup_rebuild(timestamptz, timestamptz)",
    f"DROP FUNCTION IF EXISTS {latency_sql.BINS_ADD_FUNCTION}(bigint[], bigint[])",
    f"DROP FUNCTION IF EXISTS {latency_sql.BINS_DENSE_FUNCTION}(int[], bigint[])",
)

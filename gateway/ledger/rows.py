"""How a `UsageRecord` travels as a row of `usage_records`: column order, values, COPY types.

This is the contract between the record dataclass and the table's schema (`db.models`),
kept apart from the writer's batching and retry logic so it can be read, and checked,
on its own: the column list comes from the dataclass and the COPY types from the model,
so a record field the table lacks fails here, at import, not on a live flush.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
from typing import Any

from psycopg.types.json import Jsonb

from gateway.domain.usage_record import UsageRecord

COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(UsageRecord))

_GET_COLUMNS = operator.attrgetter(*COLUMNS)
_ENUM_COLUMNS = tuple(COLUMNS.index(c) for c in ("status", "usage_source", "endpoint"))
_FALLBACK_PATH = COLUMNS.index("fallback_path")
_TAGS = COLUMNS.index("tags")


def record_row(r: UsageRecord) -> list[Any]:
    """A record as column values. Enums go as their values (psycopg would send names)."""
    row = list(_GET_COLUMNS(r))
    for i in _ENUM_COLUMNS:
        if isinstance(row[i], enum.Enum):
            row[i] = row[i].value
    # psycopg adapts lists, not tuples, to PostgreSQL arrays
    row[_FALLBACK_PATH] = list(row[_FALLBACK_PATH])
    if row[_TAGS] is not None:
        row[_TAGS] = Jsonb(row[_TAGS])
    return row


def _copy_types() -> list[str]:
    """PostgreSQL type names of the columns, from the model, for binary COPY."""
    from sqlalchemy import ARRAY, Boolean, DateTime, Integer, Numeric, Text, Uuid
    from sqlalchemy.dialects.postgresql import JSONB

    from db.models import UsageRow

    names = [
        (ARRAY, "text[]"),
        (Uuid, "uuid"),
        (DateTime, "timestamptz"),
        (Numeric, "numeric"),
        (Integer, "int4"),
        (Boolean, "bool"),
        (Text, "text"),
        (JSONB, "jsonb"),
    ]
    table = UsageRow.__table__
    return [
        next(pg for sa_type, pg in names if isinstance(table.c[c].type, sa_type)) for c in COLUMNS
    ]


# the table's own types: a batch COPYs straight into usage_records with them
TABLE_TYPES = _copy_types()
# psycopg's binary int4 dumper wraps values past 2^31 silently, while its int8 one raises:
# into the staging table integers travel as int8, and the server's range check on the
# INSERT into the int4 columns rejects what does not fit.
COPY_TYPES = [("int8" if t == "int4" else t) for t in TABLE_TYPES]
_INT4 = tuple(i for i, t in enumerate(TABLE_TYPES) if t == "int4")
_INT4_MIN, _INT4_MAX = -(2**31), 2**31 - 1


def fits_table_types(row: list[Any]) -> bool:
    """Every integer of `row` fits its int4 column, so a binary COPY with TABLE_TYPES
    cannot wrap one silently (a row that does not fit goes the staging table's way)."""
    for i in _INT4:
        v = row[i]
        if v is not None and not (isinstance(v, int) and _INT4_MIN <= v <= _INT4_MAX):
            return False
    return True

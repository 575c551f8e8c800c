"""Rows in PostgreSQL COPY's text format, for the seed's bulk load.

Faster than psycopg's write_row (about 3x here): the seed writes millions of rows, and
most of its fields are plain numbers and short strings.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _array(value: Sequence[Any]) -> str:
    items = ('"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"' for v in value)
    return ("{" + ",".join(items) + "}").translate(_ESCAPES)


def _json(value: dict[str, Any]) -> str:
    # JSONB: its JSON text, whose own backslashes COPY then escapes
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_ESCAPES)


# by exact type, the seed's fields in one look-up each (most of them numbers and text)
_RENDER: dict[type, Callable[[Any], str]] = {
    type(None): lambda _: "\\N",
    bool: lambda v: "t" if v else "f",
    int: int.__repr__,
    float: float.__repr__,
    str: lambda v: v.translate(_ESCAPES),
    Decimal: Decimal.__str__,
    uuid.UUID: uuid.UUID.__str__,
    dt.datetime: dt.datetime.isoformat,
    list: _array,
    tuple: _array,
    dict: _json,
}


def copy_text(value: Any) -> str:
    """One field in COPY's text format."""
    render = _RENDER.get(type(value))
    if render is not None:
        return render(value)
    if isinstance(value, dict):
        return _json(value)
    if isinstance(value, list | tuple):
        return _array(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value).translate(_ESCAPES)


class CopyLines:
    """Rows to COPY lines, whose last field is one of a few shared dicts (the seed's tags):
    each dict is rendered once, as JSON is the slowest field to write."""

    def __init__(self) -> None:
        # keyed by id(): the dicts are shared and kept alive by whoever made the rows
        self._last: dict[int, str] = {}

    def line(self, row: Sequence[Any]) -> str:
        last = row[-1]
        text = self._last.get(id(last))
        if text is None:
            text = self._last[id(last)] = copy_text(last)
        return "\t".join(map(copy_text, row[:-1])) + "\t" + text

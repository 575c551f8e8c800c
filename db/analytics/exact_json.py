"""JSON with every Decimal written as the exact number it is, never through a float (pure).

The usage API's money (`amount.value`) is a JSON number as OpenAI's is, with every digit
of the ledger's NUMERIC sum. A page grouped by end user holds tens of thousands of
results, so this appends to one list instead of yielding piece by piece (about three
times faster than a generator per value).
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

_dumps = json.dumps


def encode_json(body: Any) -> bytes:
    out: list[str] = []
    _encode(body, out)
    return "".join(out).encode()


def _encode(v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif isinstance(v, str):
        out.append(_dumps(v))
    elif v is True or v is False:
        out.append("true" if v else "false")
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, Decimal):
        out.append(format(v, "f"))
    elif isinstance(v, dict):
        out.append("{")
        first = True
        for k, item in v.items():
            out.append(_dumps(str(k)) + ":" if first else "," + _dumps(str(k)) + ":")
            first = False
            _encode(item, out)
        out.append("}")
    elif isinstance(v, list | tuple):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    elif isinstance(v, dt.datetime):
        out.append(_dumps(v.isoformat()))
    else:
        out.append(_dumps(v))

"""Exact JSON: money as the number it is, every other value as json.dumps writes it."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

from db.analytics.exact_json import encode_json


def test_decimals_keep_every_digit_and_the_rest_is_plain_json() -> None:
    body = {"a": [Decimal("0.0123456789012345678901"), None, True, False, 3, "x\"y"],
            "b": {"c": Decimal("1E-12"), "d": (1, 2)},
            "t": dt.datetime(2026, 11, 1, tzinfo=dt.UTC)}  # fmt: skip
    text = encode_json(body).decode()
    assert '"a":[0.0123456789012345678901,null,true,false,3,"x\\"y"]' in text
    back = json.loads(text, parse_float=Decimal)
    assert back["b"] == {"c": Decimal("0.000000000001"), "d": [1, 2]}
    assert back["t"] == "2026-11-01T00:00:00+00:00"

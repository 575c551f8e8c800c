"""orjson on the request path must read and write what `json` did, corner cases too."""

from __future__ import annotations

import json

import pytest

from gateway.domain import json_codec


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model":"m","messages":[{"role":"user","content":"h\\u00e9 \xf0\x9f\x98\x80"}]}',
        b'{"seed": 123456789012345678901234567890, "n": 1}',  # beyond 64 bits: an exact int
        b'{"x": 18446744073709551615, "y": -9223372036854775809}',
        b'{"a": 1, "a": 2}',  # the last key wins, as in json
        b'"\\ud800"',  # a lone surrogate: json reads it, the request check refuses it later
        b"\xef\xbb\xbf{}",  # a byte order mark
        b"[" * 500 + b"]" * 500,
        b'[0.1, 1e5, -0, 1e400, 12345678901234567]',
    ],
)
def test_loads_reads_exactly_what_json_reads(raw: bytes) -> None:
    got, want = json_codec.loads(raw), json.loads(raw)
    assert got == want or (got != got and want != want)  # NaN-free here; equal values
    assert json.dumps(got) == json.dumps(want)  # same types: an int stays an int


def test_loads_raises_what_json_raises() -> None:
    for raw in (b'{"a": ', b"", b"\xff"):
        with pytest.raises(ValueError) as ours:
            json_codec.loads(raw)
        with pytest.raises(ValueError) as theirs:
            json.loads(raw)
        assert str(ours.value) == str(theirs.value)


def test_nesting_too_deep_for_json_is_its_recursion_error_still() -> None:
    # the request check turns exactly this into its 400
    with pytest.raises(RecursionError):
        json_codec.loads(b"[" * 100_000 + b"]" * 100_000)


def test_loads_calls_parse_constant_for_nan_like_json() -> None:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not a JSON value")

    with pytest.raises(ValueError, match="NaN is not a JSON value"):
        json_codec.loads(b'{"t": NaN}', parse_constant=refuse)
    assert json.dumps(json_codec.loads(b"[Infinity]")) == "[Infinity]"


def test_dumps_is_compact_utf8_and_writes_what_orjson_cannot() -> None:
    assert json_codec.dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert json.loads(json_codec.dumps({"seed": 10**30})) == {"seed": 10**30}
    assert json_codec.dumps({1: "x"}) == b'{"1":"x"}'
    assert json_codec.dumps([float("nan")]) == b"[null]"

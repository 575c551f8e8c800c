"""The usage and costs API's request and page, in OpenAI's admin API shape (pure).

`parse_query` turns query parameters into a `UsageQuery` (or a `UsageParamError` that
names the parameter: a 400, never a 500); `build_page` turns grouped rows into
`{"object": "page", "data": [buckets], "has_more", "next_page"}`; `encode_json` writes
money as exact JSON numbers. The SQL lives in `db.analytics.usage_queries`; the route
in `gateway.replica.usage_api`; `costgate report` uses all three. See docs/USAGE_API.md.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

Kind = Literal["completions", "embeddings", "costs"]
KINDS: tuple[Kind, ...] = ("completions", "embeddings", "costs")
WIDTH_SECONDS = {"1m": 60, "1h": 3600, "1d": 86400}
# (default, most) buckets per page. OpenAI's: 1d 7/31 (costs 7/180), 1h 24/168, 1m 60/1440.
# costgate allows 180 days for usage too, so that one page answers a quarter.
LIMITS = {"1m": (60, 1440), "1h": (24, 168), "1d": (7, 180)}
USAGE_GROUPS = ("project_id", "api_key_id", "model", "team", "provider", "alias")
COST_GROUPS = (*USAGE_GROUPS, "line_item")
# filter parameter -> the group it filters on
FILTERS = {
    "project_ids": "project_id",
    "api_key_ids": "api_key_id",
    "models": "model",
    "teams": "team",
    "providers": "provider",
    "aliases": "alias",
}
_PARAMS = {"start_time", "end_time", "bucket_width", "group_by", "limit", "page", *FILTERS}
# OpenAI's parameters costgate has no data for: refused by name, not silently ignored
_UNSUPPORTED = {"user_ids", "batch"}
# the latest instant a bucket may start at (datetime's range, with room for one day)
MAX_UNIX = 253_402_214_400 - 2 * 86400
_CURSOR_PREFIX = "cg1:"
RESULT_OBJECTS = {
    "completions": "organization.usage.completions.result",
    "embeddings": "organization.usage.embeddings.result",
    "costs": "organization.costs.result",
}


class UsageParamError(ValueError):
    """A bad query parameter: the message says what was wrong, `param` which one."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclasses.dataclass(frozen=True)
class UsageQuery:
    """One page's worth of a usage or costs question. Times are Unix seconds on
    bucket boundaries: `start`/`end` the whole range, `page_start` this page's first."""

    kind: Kind
    width: str
    start: int
    end: int
    page_start: int
    limit: int
    group_by: tuple[str, ...] = ()
    filters: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def width_s(self) -> int:
        return WIDTH_SECONDS[self.width]

    @property
    def page_end(self) -> int:
        return min(self.end, self.page_start + self.limit * self.width_s)

    def buckets(self) -> list[tuple[int, int]]:
        step = self.width_s
        return [(t, t + step) for t in range(self.page_start, self.page_end, step)]

    def next_page(self) -> str | None:
        return encode_cursor(self.page_end) if self.page_end < self.end else None

    def following(self) -> UsageQuery | None:
        """The query for the next page, or None on the last."""
        if self.page_end >= self.end:
            return None
        return dataclasses.replace(self, page_start=self.page_end)


def encode_cursor(at: int) -> str:
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{at}".encode()).decode()


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode()
    except (binascii.Error, UnicodeError, ValueError):
        raise UsageParamError("page: not a cursor this API returned", "page") from None
    if not text.startswith(_CURSOR_PREFIX) or not text[len(_CURSOR_PREFIX) :].isdigit():
        raise UsageParamError("page: not a cursor this API returned", "page")
    return int(text[len(_CURSOR_PREFIX) :])


def _multi(items: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in items:
        key = name[:-2] if name.endswith("[]") else name  # group_by[]=model, as axios sends
        out.setdefault(key, []).append(value)
    return out


def _one(params: Mapping[str, list[str]], name: str) -> str | None:
    values = params.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise UsageParamError(f"{name}: give it once", name)
    return values[0]


def _unix(value: str, name: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageParamError(f"{name}: Unix seconds expected, got {value[:40]!r}", name) from None
    if not 0 <= number <= MAX_UNIX:
        raise UsageParamError(f"{name}: out of range (0 to {MAX_UNIX})", name)
    return number


def _names(values: Sequence[str]) -> tuple[str, ...]:
    # group_by=model&group_by=project_id, or group_by=model,project_id
    return tuple(dict.fromkeys(n.strip() for v in values for n in v.split(",") if n.strip()))


def parse_query(kind: Kind, items: Iterable[tuple[str, str]], now: int) -> UsageQuery:
    """Validate `items` (query parameters, repeated names allowed) for `kind`.

    start_time is rounded down and end_time (default: now) up to the bucket width, so
    every bucket is a whole UTC minute, hour or day, as the rollups keep them.
    """
    params = _multi(items)
    for name in params:
        if name in _UNSUPPORTED:
            raise UsageParamError(f"{name}: not supported (costgate has no such data)", name)
        if name not in _PARAMS:
            raise UsageParamError(f"unknown parameter {name[:40]!r}", name[:40])
    width = _one(params, "bucket_width") or "1d"
    if width not in WIDTH_SECONDS:
        raise UsageParamError("bucket_width: one of 1m, 1h, 1d", "bucket_width")
    step = WIDTH_SECONDS[width]
    start_text = _one(params, "start_time")
    if start_text is None:
        raise UsageParamError("start_time is required (Unix seconds)", "start_time")
    start = _unix(start_text, "start_time") // step * step
    end_text = _one(params, "end_time")
    end_raw = _unix(end_text, "end_time") if end_text is not None else min(now, MAX_UNIX)
    end = -(-end_raw // step) * step
    if end <= start:
        raise UsageParamError("end_time must be after start_time", "end_time")
    default_limit, most = LIMITS[width]
    limit_text = _one(params, "limit")
    limit = default_limit
    if limit_text is not None:
        try:
            limit = int(limit_text)
        except ValueError:
            raise UsageParamError("limit: a whole number expected", "limit") from None
        if not 1 <= limit <= most:
            raise UsageParamError(f"limit: 1 to {most} for bucket_width {width}", "limit")
    allowed = COST_GROUPS if kind == "costs" else USAGE_GROUPS
    group_by = _names(params.get("group_by", []))
    for g in group_by:
        if g not in allowed:
            raise UsageParamError(
                f"group_by: {g[:40]!r} is not one of {', '.join(allowed)}", "group_by"
            )
    filters = []
    for name, group in FILTERS.items():
        values = _names(params.get(name, []))
        if values:
            filters.append((group, values))
    page_start = start
    cursor = _one(params, "page")
    if cursor is not None:
        page_start = decode_cursor(cursor)
        if not start <= page_start < end or (page_start - start) % step:
            raise UsageParamError("page: this cursor belongs to another query", "page")
    return UsageQuery(kind, width, start, end, page_start, limit, group_by, tuple(filters))


# -- the page ------------------------------------------------------------------------

# group name -> the field of OpenAI's result it fills (line_item is composed)
_GROUP_FIELDS = ("project_id", "api_key_id", "model", "team", "provider", "alias")


def line_item(model: str | None, provider: str | None) -> str:
    """A costs line item: what answered, and who billed it ("gpt-4.1, openai")."""
    return f"{model or 'unknown'}, {provider or 'unknown'}"


def _amount(value: Decimal | None) -> dict[str, Any]:
    return {"value": value, "currency": "usd"}


def _result(query: UsageQuery, row: Mapping[str, Any]) -> dict[str, Any]:
    grouped = set(query.group_by)
    if query.kind == "costs":
        out: dict[str, Any] = {
            "object": RESULT_OBJECTS["costs"],
            # NULL: no request of this group has a known cost (unknown is not $0)
            "amount": _amount(row["actual_cost_usd"]),
            "line_item": (
                line_item(row.get("model"), row.get("provider")) if "line_item" in grouped else None
            ),
            "project_id": row.get("project_id") if "project_id" in grouped else None,
        }
        # costgate's own: the same period at list price and at the baseline's list price
        out["list_amount"] = _amount(row["list_cost_usd"])
        out["baseline_amount"] = _amount(row["baseline_cost_usd"])
        out["num_model_requests"] = int(row["requests"])
        out["unknown_cost_requests"] = int(row["unknown_cost_requests"])
        fields = [f for f in _GROUP_FIELDS if f != "project_id"]
    else:
        out = {"object": RESULT_OBJECTS[query.kind], "input_tokens": int(row["prompt_tokens"])}
        if query.kind == "completions":
            out["output_tokens"] = int(row["completion_tokens"])
            out["input_cached_tokens"] = int(row["cached_prompt_tokens"])
            out["input_audio_tokens"] = 0
            out["output_audio_tokens"] = 0
        out["num_model_requests"] = int(row["requests"])
        out["user_id"] = None
        if query.kind == "completions":
            out["batch"] = None
        fields = list(_GROUP_FIELDS)
    for f in fields:
        # with line_item, model and provider come along only when asked for by name
        out[f] = row.get(f) if f in grouped else None
    return out


def build_page(query: UsageQuery, rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Every bucket of the page (empty ones too, as OpenAI answers), rows in order."""
    by_bucket: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_bucket.setdefault(int(row["bucket"]), []).append(_result(query, row))
    data = [
        {"object": "bucket", "start_time": s, "end_time": e, "results": by_bucket.get(s, [])}
        for s, e in query.buckets()
    ]
    following = query.next_page()
    return {"object": "page", "data": data, "has_more": following is not None,
            "next_page": following}


def encode_json(body: Any) -> bytes:
    """JSON with each Decimal written as the exact number it is (never through a float)."""
    return "".join(_encode(body)).encode()


def _encode(v: Any) -> Iterable[str]:
    if isinstance(v, Decimal):
        yield format(v, "f")
    elif isinstance(v, dict):
        yield "{"
        for i, (k, item) in enumerate(v.items()):
            yield ("," if i else "") + json.dumps(str(k)) + ":"
            yield from _encode(item)
        yield "}"
    elif isinstance(v, list | tuple):
        yield "["
        for i, item in enumerate(v):
            if i:
                yield ","
            yield from _encode(item)
        yield "]"
    elif isinstance(v, dt.datetime):
        yield json.dumps(v.isoformat())
    else:
        yield json.dumps(v)

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
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

# the page's JSON, exact numbers (re-exported: the route and the report import it here)
from db.analytics.exact_json import encode_json as encode_json

Kind = Literal["completions", "embeddings", "costs"]
KINDS: tuple[Kind, ...] = ("completions", "embeddings", "costs")
WIDTH_SECONDS = {"1m": 60, "1h": 3600, "1d": 86400}
# (default, most) buckets per page. OpenAI's: 1d 7/31 (costs 7/180), 1h 24/168, 1m 60/1440.
# costgate allows 180 days for usage too, so that one page answers a quarter.
LIMITS = {"1m": (60, 1440), "1h": (24, 168), "1d": (7, 180)}
USAGE_GROUPS = ("project_id", "api_key_id", "model", "team", "provider", "alias", "experiment",
                "variant")  # fmt: skip
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
# end users and tags (docs/USAGE_API.md): `user_ids` is OpenAI's name, `users` costgate's
USER_FILTERS = ("users", "user_ids")
_PARAMS = {
    "start_time", "end_time", "bucket_width", "group_by", "limit", "page", "tags",
    "results_limit", *FILTERS, *USER_FILTERS,
}  # fmt: skip
# OpenAI's parameters costgate has no data for: refused by name, not silently ignored
# (`batch` the filter; `group_by=batch` is served for completions)
_UNSUPPORTED = {"batch"}
# the latest instant a bucket may start at (datetime's range, with room for one day)
MAX_UNIX = 253_402_214_400 - 2 * 86400
_CURSOR_PREFIX = "cg1:"
TAG_PREFIX = "tag:"
MAX_TAG_KEY_CHARS = 64  # gateway.attribution.inputs' bound
MAX_RESULTS_LIMIT = 100_000
# the groups the attribution rollups keep besides the end user and the tag
ROLLUP_GROUPS = frozenset({"project_id", "team"})
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
    # end users and tags: the users kept, (tag key, values kept) ANDed across keys, and
    # at most this many results per bucket, the costliest first (None: all)
    users: tuple[str, ...] = ()
    tags: tuple[tuple[str, tuple[str, ...]], ...] = ()
    results_limit: int | None = None

    @property
    def tag_group(self) -> str | None:
        """The tag key grouped by (`group_by=tag:KEY`), if any."""
        return next((g[4:] for g in self.group_by if g.startswith(TAG_PREFIX)), None)

    @property
    def attributed(self) -> bool:
        """Grouped or filtered by end user or tag: read from the attribution rollups."""
        return bool(self.users or self.tags or "user" in self.group_by or self.tag_group)

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
    allowed = {"costs": COST_GROUPS, "completions": (*USAGE_GROUPS, "batch")}.get(
        kind, USAGE_GROUPS)  # fmt: skip
    group_by = _attribution_groups(_names(params.get("group_by", [])))
    for g in group_by:
        if g not in allowed and g != "user" and not g.startswith(TAG_PREFIX):
            raise UsageParamError(
                f"group_by: {g[:40]!r} is not one of {', '.join(allowed)}, user, tag:KEY",
                "group_by",
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
    users = _names([v for name in USER_FILTERS for v in params.get(name, [])])
    query = UsageQuery(
        kind, width, start, end, page_start, limit, group_by, tuple(filters), users,
        _tag_filters(params.get("tags", [])), _results_limit(_one(params, "results_limit")),
    )  # fmt: skip
    check_attribution(query)
    return query


def _attribution_groups(names: tuple[str, ...]) -> tuple[str, ...]:
    out = tuple(dict.fromkeys("user" if n == "user_id" else n for n in names))
    tag_keys = [n[len(TAG_PREFIX) :] for n in out if n.startswith(TAG_PREFIX)]
    if len(tag_keys) > 1:
        raise UsageParamError("group_by: one tag key at a time (tag:KEY)", "group_by")
    if tag_keys and not 0 < len(tag_keys[0]) <= MAX_TAG_KEY_CHARS:
        raise UsageParamError("group_by: tag:KEY needs a key of 1 to 64 characters", "group_by")
    return out


def _tag_filters(values: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`tags=feature:search` (repeated, or comma-separated): values of one key are ORed,
    keys ANDed. `=` is taken for `:` too, as the x-costgate-tags header writes pairs."""
    by_key: dict[str, list[str]] = {}
    for pair in _names(values):
        sep = ":" if ":" in pair else "="
        key, found, value = pair.partition(sep)
        if not found or not key or len(key) > MAX_TAG_KEY_CHARS:
            raise UsageParamError(f"tags: KEY:VALUE expected, got {pair[:40]!r}", "tags")
        by_key.setdefault(key, [])
        if value not in by_key[key]:
            by_key[key].append(value)
    return tuple((k, tuple(v)) for k, v in by_key.items())


def _results_limit(text: str | None) -> int | None:
    if text is None:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_RESULTS_LIMIT:
        raise UsageParamError(f"results_limit: 1 to {MAX_RESULTS_LIMIT}", "results_limit")
    return int(text)


def check_attribution(query: UsageQuery) -> None:
    """A query the attribution rollups cannot answer reads raw rows, and then only a page
    of at most one day (as minute buckets do): anything wider is a 400, never a slow scan."""
    if query.results_limit is not None and not query.attributed:
        raise UsageParamError("results_limit: only with group_by=user or tag:KEY", "results_limit")
    if not query.attributed or rollup_answers(query):
        return
    span = min(query.limit * query.width_s, query.end - query.start)
    if span > 86400:
        raise UsageParamError(
            "group_by: by user or tag, only bucket_width=1d with project_id and team (and"
            " one tag key, not with user) is read from rollups; other combinations read raw"
            " rows, one day per page at most (1h: limit <= 24; 1d: limit=1)",
            "group_by",
        )


def rollup_answers(query: UsageQuery) -> bool:
    """Whether the daily user or tag rollup holds every group and filter of `query`."""
    others = {g for g in query.group_by if g != "user" and not g.startswith(TAG_PREFIX)}
    others |= {group for group, _ in query.filters}
    tag_keys = {k for k, _ in query.tags} | ({query.tag_group} if query.tag_group else set())
    by_user = bool(query.users) or "user" in query.group_by
    return (
        query.width == "1d"
        and others <= ROLLUP_GROUPS
        and len(tag_keys) <= 1
        and not (by_user and tag_keys)
    )


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
        # not kept per end user or tag: null there (docs/USAGE_API.md)
        out["baseline_amount"] = _amount(row.get("baseline_cost_usd"))
        out["num_model_requests"] = int(row["requests"])
        out["unknown_cost_requests"] = int(row["unknown_cost_requests"])
        if "user" in grouped:
            out["user_id"] = row["user_id"]
        fields = [f for f in _GROUP_FIELDS if f != "project_id"]
    else:
        out = {"object": RESULT_OBJECTS[query.kind], "input_tokens": int(row["prompt_tokens"])}
        if query.kind == "completions":
            out["output_tokens"] = int(row["completion_tokens"])
            out["input_cached_tokens"] = int(row["cached_prompt_tokens"])
            out["input_audio_tokens"] = 0
            out["output_audio_tokens"] = 0
        out["num_model_requests"] = int(row["requests"])
        out["user_id"] = row["user_id"] if "user" in grouped else None
        if query.kind == "completions":  # grouped by it: true for the batch lines
            out["batch"] = row.get("batch") if "batch" in grouped else None
        fields = list(_GROUP_FIELDS)
    for f in fields:
        # with line_item, model and provider come along only when asked for by name
        out[f] = row.get(f) if f in grouped else None
    for f in ("experiment", "variant"):  # costgate's own: only when grouped by
        if f in grouped:
            out[f] = row.get(f)
    tag = query.tag_group
    if tag is not None:
        out["tags"] = {tag: row["tag_value"]}
    return out


def build_page(query: UsageQuery, rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Every bucket of the page (empty ones too, as OpenAI answers), rows in order."""
    by_bucket: dict[int, list[dict[str, Any]]] = {}
    groups: dict[int, int] = {}  # with results_limit: how many groups each bucket had
    for row in rows:
        at = int(row["bucket"])
        by_bucket.setdefault(at, []).append(_result(query, row))
        if "bucket_groups" in row:
            groups[at] = int(row["bucket_groups"])
    data = []
    for s, e in query.buckets():
        results = by_bucket.get(s, [])
        bucket = {"object": "bucket", "start_time": s, "end_time": e, "results": results}
        if query.results_limit is not None:
            bucket["results_omitted"] = groups.get(s, 0) - len(results)
        data.append(bucket)
    following = query.next_page()
    return {
        "object": "page",
        "data": data,
        "has_more": following is not None,
        "next_page": following,
    }

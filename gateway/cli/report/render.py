"""`costgate report`'s output: the API's buckets as rows, then a table, CSV or JSON (pure)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from db.analytics.usage_request import COST_GROUPS, TAG_PREFIX, Kind, encode_json

MEASURES: dict[str, tuple[str, ...]] = {
    "completions": ("input_tokens", "output_tokens", "input_cached_tokens", "num_model_requests"),
    "embeddings": ("input_tokens", "num_model_requests"),
    "costs": (
        "amount",
        "list_amount",
        "baseline_amount",
        "num_model_requests",
        "unknown_cost_requests",
    ),
}


def _iso(unix: int) -> str:
    return dt.datetime.fromtimestamp(unix, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def flatten(kind: Kind, group_by: Sequence[str], buckets: Iterable[dict[str, Any]]) -> list[
    dict[str, Any]
]:
    """One dict per (bucket, result): start, end, the groups asked for, the measures
    (money as its exact Decimal, in USD; None where unknown)."""
    groups = [g for g in COST_GROUPS if g in group_by]
    by_user = "user" in group_by
    tag = next((g[len(TAG_PREFIX) :] for g in group_by if g.startswith(TAG_PREFIX)), None)
    rows = []
    for bucket in buckets:
        for result in bucket["results"]:
            row: dict[str, Any] = {
                "start": _iso(bucket["start_time"]),
                "end": _iso(bucket["end_time"]),
            }
            if by_user:
                row["user_id"] = result.get("user_id")
            if tag is not None:
                row[f"tag:{tag}"] = result["tags"][tag]
            for g in groups:
                row[g] = result.get(g)
            for m in MEASURES[kind]:
                v = result[m]
                row[m if not isinstance(v, dict) else f"{m}_usd"] = (
                    v["value"] if isinstance(v, dict) else v
                )
            rows.append(row)
    return rows


def totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Column sums of the measures (None values skipped; None if all were None)."""
    out: dict[str, Any] = {}
    for row in rows:
        for k, v in row.items():
            if isinstance(v, int | Decimal) and not isinstance(v, bool):
                out[k] = v if out.get(k) is None else out[k] + v
            else:
                out.setdefault(k, None)
    return out


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, Decimal):
        return format(v, "f")
    return str(v)


def as_table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return "no usage in this period"
    header = list(rows[0])
    total = totals(rows)
    lines = [header, *[[_cell(r.get(c)) for c in header] for r in rows]]
    lines.append(["total", *["" if total.get(c) is None else _cell(total[c]) for c in header[1:]]])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    numeric = [c.endswith(("tokens", "requests", "_usd")) for c in header]
    out = []
    for line in lines:
        cells = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(line, widths, numeric, strict=True)
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def as_csv(rows: Sequence[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: "" if v is None else _cell(v) for k, v in r.items()})
    return buf.getvalue()


def as_json(buckets: list[dict[str, Any]]) -> str:
    """The API's own page shape, every bucket of the range in one page."""
    page = {"object": "page", "data": buckets, "has_more": False, "next_page": None}
    return encode_json(page).decode()

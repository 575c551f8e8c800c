"""A batch row as the app's SDK expects it: OpenAI's `batch` object, Anthropic's
`message_batch`. Pure."""

from __future__ import annotations

import datetime as dt
from typing import Any

OPEN = ("validating", "in_progress", "finalizing", "cancelling")
WINDOW = dt.timedelta(hours=24)


def _ts(at: dt.datetime | None) -> int | None:
    return None if at is None else int(at.timestamp())


def _iso(at: dt.datetime | None) -> str | None:
    return None if at is None else at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def openai_batch(row: dict[str, Any]) -> dict[str, Any]:
    status = row["status"]
    total = len(row["lines"])
    ended = row["ended_at"]
    counts = {"total": total, "completed": row["completed_lines"], "failed": row["failed_lines"]}
    return {
        "id": row["id"], "object": "batch", "endpoint": row["endpoint"], "errors": None,
        "input_file_id": row["input_file_id"], "completion_window": row["completion_window"],
        "status": status, "output_file_id": row["output_file_id"],
        "error_file_id": row["error_file_id"], "created_at": _ts(row["created_at"]),
        "in_progress_at": _ts(row["created_at"]),
        "expires_at": _ts(row["created_at"] + WINDOW),
        "finalizing_at": _ts(ended), "completed_at": _ts(ended) if status == "completed" else None,
        "failed_at": _ts(ended) if status == "failed" else None,
        "expired_at": _ts(ended) if status == "expired" else None,
        "cancelling_at": _ts(row["cancelling_at"]),
        "cancelled_at": _ts(ended) if status == "cancelled" else None,
        "request_counts": counts, "metadata": row["metadata"],
    }


def anthropic_batch(row: dict[str, Any], results_url: str) -> dict[str, Any]:
    status = row["status"]
    ended = status not in OPEN
    total = len(row["lines"])
    done, failed = row["completed_lines"], row["failed_lines"]
    canceled = row["cancelling_at"] is not None
    return {
        "id": row["id"], "type": "message_batch",
        "processing_status": "ended" if ended else "canceling" if canceled else "in_progress",
        "request_counts": {
            "processing": 0 if ended else total, "succeeded": done,
            "errored": 0 if canceled else failed, "canceled": failed if canceled else 0,
            "expired": 0,
        },
        "ended_at": _iso(row["ended_at"]), "created_at": _iso(row["created_at"]),
        "expires_at": _iso(row["created_at"] + WINDOW),
        "cancel_initiated_at": _iso(row["cancelling_at"]), "archived_at": None,
        "results_url": results_url if ended else None,
    }

"""One piece of feedback as an app sends it to `POST /v1/feedback`, checked and bounded.

A request id (the `x-costgate-request-id` of the answer), a score in [0, 1] or
`thumbs: up|down`, optional labels (short strings) and a short comment, and optionally
who rated (`rater`, e.g. the app's own user id; by default the key that sends it).
"""

from __future__ import annotations

import dataclasses
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

MAX_LABELS = 16
MAX_LABEL_CHARS = 64
MAX_COMMENT_CHARS = 1000
MAX_RATER_CHARS = 128
THUMBS = {"up": Decimal(1), "down": Decimal(0)}
_SCORE_STEP = Decimal("0.0001")  # the column's scale: finer scores are rounded to it


class FeedbackError(ValueError):
    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.message, self.param = message, param


@dataclasses.dataclass(frozen=True, slots=True)
class Feedback:
    request_id: uuid.UUID
    score: Decimal  # [0, 1]
    rater: str | None  # None: the sending key (or app) rates
    labels: tuple[str, ...] | None = None
    comment: str | None = None


def parse_feedback(body: Any) -> Feedback:
    """The feedback in a request body; a `FeedbackError` names the field that is wrong."""
    if not isinstance(body, dict):
        raise FeedbackError("The body must be a JSON object.", "body")
    rid = body.get("request_id")
    try:
        request_id = uuid.UUID(rid) if isinstance(rid, str) else None
    except ValueError:
        request_id = None
    if request_id is None:
        raise FeedbackError("request_id must be a request id (a UUID).", "request_id")
    return Feedback(request_id, _score(body), _rater(body.get("rater")),
                    _labels(body.get("labels")), _comment(body.get("comment")))  # fmt: skip


def _score(body: dict[str, Any]) -> Decimal:
    score, thumbs = body.get("score"), body.get("thumbs")
    if (score is None) == (thumbs is None):
        raise FeedbackError("Give exactly one of score (0 to 1) and thumbs (up or down).", "score")
    if thumbs is not None:
        if thumbs not in THUMBS:
            raise FeedbackError("thumbs must be 'up' or 'down'.", "thumbs")
        return THUMBS[thumbs]
    if isinstance(score, bool) or not isinstance(score, int | float | str):
        raise FeedbackError("score must be a number from 0 to 1.", "score")
    try:
        value = Decimal(str(score))
    except InvalidOperation:
        raise FeedbackError("score must be a number from 0 to 1.", "score") from None
    if not value.is_finite() or not 0 <= value <= 1:
        raise FeedbackError("score must be a number from 0 to 1.", "score")
    return value.quantize(_SCORE_STEP)


def _rater(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_RATER_CHARS or "\x00" in value:
        raise FeedbackError(f"rater must be a string of 1 to {MAX_RATER_CHARS} characters.",
                            "rater")  # fmt: skip
    return value


def _labels(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    ok = isinstance(value, list) and len(value) <= MAX_LABELS and all(
        isinstance(v, str) and 0 < len(v) <= MAX_LABEL_CHARS and "\x00" not in v for v in value
    )
    if not ok:
        raise FeedbackError(f"labels must be a list of at most {MAX_LABELS} strings of 1 to "
                            f"{MAX_LABEL_CHARS} characters.", "labels")  # fmt: skip
    return tuple(value)


def _comment(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_COMMENT_CHARS or "\x00" in value:
        raise FeedbackError(f"comment must be a string of at most {MAX_COMMENT_CHARS} "
                            "characters.", "comment")  # fmt: skip
    return value

"""Feedback into PostgreSQL: one score per (request, rater), the last one standing, each
one kept in `feedback_changes`; an app may rate only its own requests.

The request's app and model come from its ledger row, so a request is rateable once its
row is written (the writer flushes every batch within `ledger.flush_interval_s`), and
for as long as the row is kept: late feedback counts.
"""

from __future__ import annotations

import enum
import uuid
from decimal import Decimal

from sqlalchemy import Engine, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from db.models import UsageRow
from db.quality.tables import feedback, feedback_changes


class Stored(enum.Enum):
    CREATED = "created"
    REPLACED = "replaced"
    UNKNOWN_REQUEST = "unknown_request"  # no ledger row has this id
    NOT_YOURS = "not_yours"  # another app's request


def store_feedback(
    engine: Engine,
    *,
    request_id: uuid.UUID,
    app: str,
    rater: str,
    score: Decimal,
    labels: list[str] | None,
    comment: str | None,
) -> Stored:
    with engine.begin() as conn:
        row = conn.execute(
            select(UsageRow.app, UsageRow.model).where(UsageRow.request_id == request_id)
        ).first()
        if row is None:
            return Stored.UNKNOWN_REQUEST
        if row.app != app:
            return Stored.NOT_YOURS
        values = {"score": score, "labels": labels, "comment": comment}
        stmt = pg_insert(feedback).values(request_id=request_id, rater=rater, app=row.app,
                                          model=row.model, **values)  # fmt: skip
        upsert = stmt.on_conflict_do_update(
            index_elements=[feedback.c.request_id, feedback.c.rater],
            set_={**values, "updated_at": stmt.excluded.updated_at},
        ).returning(feedback.c.created_at != feedback.c.updated_at)
        replaced = bool(conn.execute(upsert).scalar_one())
        conn.execute(insert(feedback_changes).values(request_id=request_id, rater=rater,
                                                     **values))  # fmt: skip
    return Stored.REPLACED if replaced else Stored.CREATED

"""Feedback on requests, as Core tables on the ledger's metadata.

`feedback` holds one score per (request, rater): the last one given. Every score given,
the replaced ones included, is kept in `feedback_changes`. `request_id` is not a foreign
key (as the ledger's own ids are not): feedback may come before its row is partitioned
away, and an erasure never has to touch it. `app` is the request's app, copied so that
quality by app needs no join; `model` likewise, for quality per model.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Date,
    DateTime,
    Index,
    Numeric,
    Table,
    Text,
    Uuid,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from db.models import Base, UsageRow

Score = Numeric(5, 4)  # [0, 1], exact: thumbs up is 1, down 0

feedback = Table(
    "feedback",
    Base.metadata,
    Column("request_id", Uuid, primary_key=True),
    Column("rater", Text, primary_key=True),
    Column("app", Text, nullable=False),
    Column("model", Text),
    Column("score", Score, nullable=False),
    Column("labels", JSONB(none_as_null=True)),
    Column("comment", Text),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("score >= 0 AND score <= 1", name="score"),
    Index("ix_feedback_updated_at", "updated_at"),
)

feedback_changes = Table(
    "feedback_changes",
    Base.metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("request_id", Uuid, nullable=False),
    Column("rater", Text, nullable=False),
    Column("score", Score, nullable=False),
    Column("labels", JSONB(none_as_null=True)),
    Column("comment", Text),
    Column("changed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_feedback_changes_request_id", "request_id"),
)

# an experiment's rows, for its results (db.quality.experiment_results); only rows that
# served one are indexed
_rows = UsageRow.__table__.c
Index("ix_usage_records_experiment_variant", _rows.experiment, _rows.variant,
      postgresql_where=text("experiment IS NOT NULL"))  # fmt: skip

# feedback per UTC day (of when it was given), app and model, kept by a row trigger on
# `feedback` (`FEEDBACK_ROLLUP_SQL`): a replaced score moves out of its old day and into
# the new one. What `policy: quality` reads (db.quality.model_quality)
feedback_rollup_daily = Table(
    "feedback_rollup_daily",
    Base.metadata,
    Column("bucket", Date, primary_key=True),
    Column("app", Text, primary_key=True),
    Column("model", Text, primary_key=True),  # '' for a request that no model answered
    Column("ratings", BigInteger, nullable=False, server_default=text("0")),
    Column("score_sum", Numeric, nullable=False, server_default=text("0")),
)

_ROLL = """
    INSERT INTO feedback_rollup_daily AS r (bucket, app, model, ratings, score_sum)
    VALUES (({row}.updated_at AT TIME ZONE 'UTC')::date, {row}.app, coalesce({row}.model, ''),
            {sign}1, {sign}{row}.score)
    ON CONFLICT (bucket, app, model) DO UPDATE
    SET ratings = r.ratings + excluded.ratings, score_sum = r.score_sum + excluded.score_sum;"""
FEEDBACK_ROLLUP_SQL = (
    f"""CREATE OR REPLACE FUNCTION feedback_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN{_ROLL.format(row="OLD", sign="-")}
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN{_ROLL.format(row="NEW", sign="")}
  END IF;
  RETURN NULL;
END $$""",
    "CREATE TRIGGER feedback_rollup AFTER INSERT OR UPDATE OR DELETE ON feedback "
    "FOR EACH ROW EXECUTE FUNCTION feedback_rollup()",
)

"""Feedback per model over a window, as the replicas load it for `policy: quality`."""

from __future__ import annotations

import uuid

from sqlalchemy import Engine, text

from db.quality.model_quality import model_quality


def test_scores_per_model_count_only_feedback_inside_the_window(
    ledger_engine: Engine, clean_ledger: None
) -> None:
    rows = [("gpt-4.1", 1, 0), ("gpt-4.1", 0.5, 1), ("deepseek-v3.2", 0, 2),
            ("deepseek-v3.2", 1, 20), (None, 1, 0)]  # fmt: skip
    with ledger_engine.begin() as conn:
        for model, score, days_ago in rows:
            conn.execute(text(
                "INSERT INTO feedback (request_id, rater, app, model, score, updated_at) "
                "VALUES (:r, 'u', 'a', :m, :s, now() - make_interval(days => :d))"
            ), {"r": uuid.uuid4(), "m": model, "s": score, "d": days_ago})  # fmt: skip
    got = model_quality(ledger_engine, [7, 30, 7])
    assert got[7] == {"gpt-4.1": (0.75, 2), "deepseek-v3.2": (0.0, 1)}
    assert got[30]["deepseek-v3.2"] == (0.5, 2)


def test_the_daily_rollup_follows_every_insert_replace_and_delete(
    ledger_engine: Engine, clean_ledger: None
) -> None:
    rid = uuid.uuid4()
    upsert = text(
        "INSERT INTO feedback (request_id, rater, app, model, score) VALUES (:r, :who, 'a', "
        "'gpt-4.1', :s) ON CONFLICT (request_id, rater) DO UPDATE SET score = excluded.score"
    )
    with ledger_engine.begin() as conn:
        conn.execute(upsert, {"r": rid, "who": "u1", "s": 1})
        conn.execute(upsert, {"r": rid, "who": "u2", "s": 0.5})
    with ledger_engine.begin() as conn:
        conn.execute(upsert, {"r": rid, "who": "u1", "s": 0})  # replaced: 1 out, 0 in
    assert model_quality(ledger_engine, [1])[1] == {"gpt-4.1": (0.25, 2)}
    with ledger_engine.begin() as conn:
        conn.execute(text("DELETE FROM feedback WHERE rater = 'u2'"))
        rollup = conn.execute(text("SELECT ratings, score_sum FROM feedback_rollup_daily")).one()
    assert (rollup[0], float(rollup[1])) == (1, 0.0)

"""Each model's feedback over a window of UTC days, from the daily feedback rollup: what
`policy: quality` routes on. Loaded by each replica in the background (every
`QUALITY_REFRESH_S`), never per request."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Engine, text

QUALITY_REFRESH_S = 60.0

# the window's whole UTC days, today included, from the daily rollup
_SQL = text(
    "SELECT model, (sum(score_sum) / sum(ratings))::float8, sum(ratings) "
    "FROM feedback_rollup_daily "
    "WHERE bucket > (now() AT TIME ZONE 'UTC')::date - :d AND model <> '' "
    "GROUP BY model HAVING sum(ratings) > 0"
)


def model_quality(
    engine: Engine, windows_days: Iterable[int]
) -> dict[int, dict[str, tuple[float, int]]]:
    """window (days, today included) -> model -> (mean score, number of scores), by the
    day each score was given."""
    out: dict[int, dict[str, tuple[float, int]]] = {}
    with engine.connect() as conn:
        for days in sorted(set(windows_days)):
            rows = conn.execute(_SQL, {"d": days}).all()
            out[days] = {r[0]: (float(r[1]), int(r[2])) for r in rows}
    return out

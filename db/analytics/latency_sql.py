"""The latency rollups' columns and SQL (pure): one histogram per bucket × group × metric.

`latency_rollup_hourly` and `latency_rollup_daily` hold, per UTC hour (day), group (app,
team, model, provider, endpoint) and metric (`latency`, `ttft`), the successful requests'
counts in log-spaced bins: `bins[b + 1]` requests with floor(ln(1 + ms) × BINS_PER_LN) = b.
A batch's histograms are merged into its groups' rows (`latency_bins_add`), so a rollup
holds one row per hour × group × metric whatever the traffic. `db.analytics.rollup_sql`
puts these folds in the trigger and the rebuild. See docs/ROLLUPS.md.
"""

from __future__ import annotations

from typing import Literal

Grain = Literal["hour", "day"]

LATENCY_TABLES: dict[Grain, str] = {
    "hour": "latency_rollup_hourly",
    "day": "latency_rollup_daily",
}

LATENCY_DIMENSIONS: dict[str, str] = {
    "app": "text",
    "team": "text",
    "model": "text",
    "provider": "text",
    "endpoint": "text",
    "metric": "text",  # 'latency' | 'ttft'
}
# dashboard.latency.BINS_PER_LN (a test checks they agree): bin = floor(ln(1 + ms) × 50),
# each bin e^(1/50) - 1 = 2.02% wide in (1 + ms), so a percentile interpolated inside its
# bin is within 2.02% of (1 + the exact value). A group's hour holds one row per metric
# whose `bins` array counts requests per bin: one row per hour × group × metric,
# whatever the traffic, instead of one per bin (docs/ROLLUPS.md)
BINS_PER_LN = 50
# the histogram of a rollup row: `bins[b + 1]` requests in bin b, for b in [0, NBINS);
# the last bin also takes anything slower (ln(1 + ms) >= 16: over 2.4 hours)
NBINS = 800
# adds two histograms (the ON CONFLICT merge of a batch into its group's hour), and
# makes one from (bins, requests) pairs
BINS_ADD_FUNCTION = "latency_bins_add"
BINS_DENSE_FUNCTION = "latency_bins_dense"


def latency_key() -> tuple[str, ...]:
    return ("bucket", *LATENCY_DIMENSIONS)


def _bucket(grain: Grain) -> str:
    # the UTC hour or day, whatever the session's time zone
    return f"date_trunc('{grain}', r.started_at, 'UTC')"


def bins_add_function_sql() -> list[str]:
    """`latency_bins_add(a, b)`: the histogram holding both histograms' requests, and
    `latency_bins_dense(bins, requests)`: the histogram of those pairs.

    Histograms are arrays of NBINS counts, mostly zeros (a group's hour or day of a batch
    fills a few dozen bins). Both functions touch only the bins that hold requests, in
    place on PL/pgSQL's expanded array: merging a batch's histogram costs one pass
    reading `b` and one assignment per non-empty bin, where the SQL they replace
    (`unnest` both and `array_agg` the sums; a join of every bin with the pairs) built
    NBINS rows each time: a merge took 117 µs against 181 µs, measured in `psql` on
    histograms of 800 bins a quarter full (issue 29)."""
    return [
        f"CREATE OR REPLACE FUNCTION {BINS_ADD_FUNCTION}(a bigint[], b bigint[])"
        " RETURNS bigint[]\nLANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$\n"
        "DECLARE i int := 0; v bigint;\nBEGIN\n"
        "  FOREACH v IN ARRAY b LOOP\n"
        "    i := i + 1;\n"
        "    IF v <> 0 THEN a[i] := a[i] + v; END IF;\n"
        "  END LOOP;\n"
        "  RETURN a;\nEND $$",
        f"CREATE OR REPLACE FUNCTION {BINS_DENSE_FUNCTION}(bins int[], requests bigint[])"
        " RETURNS bigint[]\nLANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$\n"
        f"DECLARE h bigint[] := array_fill(0::bigint, ARRAY[{NBINS}]); k int;\nBEGIN\n"
        "  FOR k IN 1 .. coalesce(cardinality(bins), 0) LOOP\n"
        "    h[bins[k] + 1] := h[bins[k] + 1] + requests[k];\n"
        "  END LOOP;\n"
        "  RETURN h;\nEND $$",
    ]


def _histograms(source: str, bucket: str) -> str:
    """One row per bucket × group × metric × bin of the successful rows of `source`."""
    return (
        f"SELECT {bucket} AS bucket, r.app, r.team, r.model, r.provider, r.endpoint, m.metric,"
        f" least(floor(ln(1 + m.ms::float8) * {BINS_PER_LN})::int, {NBINS - 1}) AS bin,"
        " count(*) AS bin_requests\n"
        f"FROM {source} r CROSS JOIN LATERAL"
        " (VALUES ('latency', r.latency_ms), ('ttft', r.ttft_ms)) AS m(metric, ms)\n"
        "WHERE r.status = 'ok' AND m.ms IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6, 7, 8"
    )


def insert_histograms_sql(table: str, bins: str) -> str:
    """INSERT of `bins` (rows of _histograms' shape) as one map per group, key order."""
    key = latency_key()
    positions = ", ".join(str(i) for i in range(1, len(key) + 1))
    return (
        f"INSERT INTO {table} AS t ({', '.join(key)}, requests, bins)\n"
        f"SELECT {', '.join(key)}, sum(bin_requests),"
        f" {BINS_DENSE_FUNCTION}(array_agg(bin), array_agg(bin_requests::bigint))\n"
        f"FROM ({bins}) AS h\n"
        f"GROUP BY {positions} ORDER BY {positions}"
    )


def fold_latency_sql(grain: Grain, source: str) -> str:
    """Add the successful rows of `source` to the grain's latency and TTFT histograms."""
    return (
        insert_histograms_sql(LATENCY_TABLES[grain], _histograms(source, _bucket(grain)))
        + f"\nON CONFLICT ({', '.join(latency_key())}) DO UPDATE SET"
        " requests = t.requests + excluded.requests,"
        f" bins = {BINS_ADD_FUNCTION}(t.bins, excluded.bins)"
    )


def fold_latency_hour_and_day_sql(source: str) -> str:
    """Both grains' histograms of `source` in one statement: the rows are binned once per
    hour, and the days merged from those bins."""
    dims = ", ".join(LATENCY_DIMENSIONS)
    conflict = (
        f"\nON CONFLICT ({', '.join(latency_key())}) DO UPDATE SET"
        " requests = t.requests + excluded.requests,"
        f" bins = {BINS_ADD_FUNCTION}(t.bins, excluded.bins)"
    )
    days = (
        f"SELECT date_trunc('day', bucket, 'UTC') AS bucket, {dims}, bin,"
        " sum(bin_requests) AS bin_requests FROM batch_bins GROUP BY 1, 2, 3, 4, 5, 6, 7, 8"
    )
    return (
        f"WITH batch_bins AS MATERIALIZED ({_histograms(source, _bucket('hour'))}),\n"
        f"hourly AS ({insert_histograms_sql(LATENCY_TABLES['hour'], 'SELECT * FROM batch_bins')}"
        f"{conflict})\n{insert_histograms_sql(LATENCY_TABLES['day'], days)}{conflict}"
    )


def latency_days_from_hours_sql() -> str:
    """The day histograms of [lo, hi) merged from their hours (inside the rebuild)."""
    dims = ", ".join(LATENCY_DIMENSIONS)
    bins = (
        f"SELECT date_trunc('day', u.bucket, 'UTC') AS bucket, {dims}, e.i::int - 1 AS bin,"
        f" sum(e.n) AS bin_requests FROM {LATENCY_TABLES['hour']} u"
        " CROSS JOIN LATERAL unnest(u.bins) WITH ORDINALITY AS e(n, i)"
        " WHERE u.bucket >= lo AND u.bucket < hi AND e.n > 0 GROUP BY 1, 2, 3, 4, 5, 6, 7, 8"
    )
    return insert_histograms_sql(LATENCY_TABLES["day"], bins)

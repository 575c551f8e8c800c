"""The usage API's groups and measures as SQL: one definition for the cube's rollups, the
attribution rollups and raw ledger rows (`usage_queries`, `usage_attribution`)."""

from __future__ import annotations

# the endpoints each kind covers (costs: every endpoint)
# (batch lines are chat completions sent through a Batch API: docs/BATCHES.md)
COMPLETION_ENDPOINTS = ("chat.completions", "completions", "responses", "messages", "batch")
ENDPOINTS: dict[str, tuple[str, ...] | None] = {
    "completions": COMPLETION_ENDPOINTS,
    "embeddings": ("embeddings",),
    "costs": None,
}

# group or filter name -> column (the same name in the rollups and the ledger)
COLUMNS = {
    "project_id": "app",
    "api_key_id": "key_id::text",
    "model": "model",
    "team": "team",
    "provider": "provider",
    "alias": "alias",
    # A/B experiments (docs/EXPERIMENTS.md): no rollup keeps them, raw rows answer
    "experiment": "experiment",
    "variant": "variant",
    # OpenAI's `batch` group of completions: a batch line or a live request
    "batch": "(endpoint = 'batch')",
}
RAW_ONLY_GROUPS = frozenset({"experiment", "variant"})
# measure -> (over a rollup, over raw ledger rows)
MEASURES = {
    "requests": ("sum(requests)", "count(*)"),
    "prompt_tokens": ("sum(prompt_tokens)", "coalesce(sum(prompt_tokens), 0)"),
    "cached_prompt_tokens": (
        "sum(cached_prompt_tokens)",
        "coalesce(sum(cached_prompt_tokens), 0)",
    ),
    "completion_tokens": ("sum(completion_tokens)", "coalesce(sum(completion_tokens), 0)"),
    "unknown_cost_requests": (
        "sum(unknown_cost_requests)",
        "count(*) FILTER (WHERE actual_cost_usd IS NULL AND (status IN ('ok', 'cancelled')"
        " OR usage_source = 'estimated'))",
    ),
    "actual_cost_usd": ("sum(actual_cost_usd)", "sum(actual_cost_usd)"),
    "list_cost_usd": ("sum(list_cost_usd)", "sum(list_cost_usd)"),
    "baseline_cost_usd": ("sum(baseline_cost_usd)", "sum(baseline_cost_usd)"),
}


def range_where(
    time_col: str,
    endpoints: tuple[str, ...] | None,
    filters: tuple[tuple[str, tuple[str, ...]], ...],
    params: dict[str, object],
) -> list[str]:
    """The conditions every usage question starts with: the page's time range (`:start`,
    `:end`), the kind's endpoints, the filters by group; their values go into `params`."""
    where = [f"{time_col} >= :start", f"{time_col} < :end"]
    if endpoints is not None:
        where.append("endpoint = ANY(:endpoints)")
        params["endpoints"] = list(endpoints)
    for i, (group, values) in enumerate(filters):
        where.append(f"{COLUMNS[group]} = ANY(:f{i})")
        params[f"f{i}"] = list(values)
    return where

"""Figures on the requests that did not end ok, per dimension, from the cube.

Kept apart from the money figures (`dashboard.spend`) because they answer an operator's
question rather than finance's: which provider fails, and how. A failed request counts
here by its status alone, whatever its cost; the cube's `status` and `error_class`
dimensions are all these need, so they stay pure pandas like the rest.
"""

from __future__ import annotations

import pandas as pd


def error_rates(cube: pd.DataFrame, by: str) -> pd.DataFrame:
    """Requests, errors and error rate (%) per value of `by`."""
    if cube.empty:
        return pd.DataFrame(columns=[by, "requests", "errors", "error_rate_pct"])
    frame = cube.assign(errors=cube["requests"].where(cube["status"] != "ok", 0))
    g = frame.groupby(by, dropna=False)[["requests", "errors"]].sum().reset_index()
    g[by] = g[by].fillna("(none)")
    g["error_rate_pct"] = (g["errors"] * 100 / g["requests"]).round(2)
    return g.sort_values("errors", ascending=False).reset_index(drop=True)


def errors_by_class(cube: pd.DataFrame) -> pd.DataFrame:
    """Failed requests per (error class, provider)."""
    failed = cube[cube["status"] != "ok"] if len(cube) else cube
    if failed.empty:
        return pd.DataFrame(columns=["error_class", "provider", "requests"])
    g = failed.groupby(["error_class", "provider"], dropna=False)["requests"].sum()
    out = g.reset_index()
    # as text first: a column with no value at all comes back float (NaN), and filling a
    # float column with text is deprecated in pandas (an error in a later release)
    names = {"error_class": "(unclassified)", "provider": "(none)"}
    out = out.astype(dict.fromkeys(names, object)).fillna(names)
    return out.sort_values("requests", ascending=False).reset_index(drop=True)

"""`costgate experiments show`'s table (the figures: `db.quality.experiment_report`)."""

from __future__ import annotations

from typing import Any

from db.quality.experiment_report import MEASURE_LABELS
from gateway.experiments.spec import Experiment


def _fmt(value: Any, places: int) -> str:
    return "-" if value is None else f"{float(value):.{places}f}"


def render_results(name: str, exp: Experiment, results: dict[str, Any]) -> str:
    lines = [f"experiment {name} · alias {exp.alias} · by {exp.stick} · control "
             f"{exp.control} · intervals: {results['interval']}"]  # fmt: skip
    for v in results["variants"]:
        lines.append(
            f"\n{v['variant']}{' (control)' if v['control'] else ''}: {v['requests']} requests, "
            f"{_fmt(v['cost_per_request_usd'], 8)} USD/request, "
            f"{_fmt(v['cost_per_1000_usd'], 4)} USD/1k, p50 {_fmt(v['latency_p50_ms'], 0)} ms, "
            f"p95 {_fmt(v['latency_p95_ms'], 0)} ms, projected month "
            f"{_fmt(v['projected_monthly_usd'], 2)} USD"
        )
        for m, (label, places) in MEASURE_LABELS.items():
            s = v["measures"].get(m) or {}
            line = f"  {label:<20} {_fmt(s.get('mean'), places):>14} (n {s.get('n', 0)})"
            if "diff" in s:
                mark = " *" if s["excludes_zero"] else ""
                line += (f"  Δ {_fmt(s['diff'], places)} [{_fmt(s['low'], places)}, "
                         f"{_fmt(s['high'], places)}]{mark}")  # fmt: skip
            lines.append(line)
    lines.append("\n* the 95% interval excludes 0")
    return "\n".join(lines)

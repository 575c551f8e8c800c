"""The arithmetic of `costgate bench`: percentiles, per-target summaries, overhead, a table.

Pure, so the figures a user reads can be checked by unit tests. Latency percentiles are
over successful requests only (a fast error must not make a target look quick); errors
are counted beside them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class Sample:
    """One request: how long it took, when its first token came, what went wrong."""

    latency_s: float
    ttft_s: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation (numpy's default method)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _distribution_ms(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    ms = [v * 1000 for v in values]
    out = {f"p{q}": percentile(ms, q) for q in PERCENTILES}
    out["mean"] = sum(ms) / len(ms)
    out["max"] = max(ms)
    return out


@dataclass(frozen=True)
class TargetSummary:
    name: str
    url: str
    model: str
    requests: int
    errors: int
    duration_s: float
    latency_ms: dict[str, float]
    ttft_ms: dict[str, float] = field(default_factory=dict)
    error_kinds: dict[str, int] = field(default_factory=dict)
    # the load generator's own CPU time: on a small machine it competes with the target
    client_cpu_s: float | None = None
    # `--profile`: CPU seconds of each process category during this target's turns
    process_cpu_s: dict[str, float] | None = None

    def cpu_ms_per_request(self) -> dict[str, float] | None:
        if self.process_cpu_s is None:
            return None
        return {k: 1000 * v / max(self.requests, 1) for k, v in self.process_cpu_s.items()}

    @property
    def rps(self) -> float:
        """Completed requests (successful or not) per second of wall time."""
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "url": self.url, "model": self.model,
            "requests": self.requests, "errors": self.errors,
            "error_kinds": self.error_kinds, "duration_s": self.duration_s,
            "rps": self.rps, "latency_ms": self.latency_ms, "ttft_ms": self.ttft_ms,
            "client_cpu_s": self.client_cpu_s,
            "cpu_ms_per_request": self.cpu_ms_per_request(),
        }


def summarize(name: str, url: str, model: str, samples: Iterable[Sample],
              duration_s: float, client_cpu_s: float | None = None,
              process_cpu_s: dict[str, float] | None = None) -> TargetSummary:
    samples = list(samples)
    good = [s for s in samples if s.ok]
    ttfts = [s.ttft_s for s in good if s.ttft_s is not None]
    errors = Counter(s.error for s in samples if s.error is not None)
    return TargetSummary(
        name=name, url=url, model=model, requests=len(samples),
        errors=sum(errors.values()), duration_s=duration_s,
        latency_ms=_distribution_ms([s.latency_s for s in good]),
        ttft_ms=_distribution_ms(ttfts), error_kinds=dict(errors.most_common()),
        client_cpu_s=client_cpu_s, process_cpu_s=process_cpu_s,
    )


def overhead(gateway: TargetSummary, direct: TargetSummary) -> dict[str, dict[str, float]]:
    """Gateway minus direct, per percentile, in ms (latency, and TTFT for streams)."""
    out: dict[str, dict[str, float]] = {}
    for key in ("latency_ms", "ttft_ms"):
        g, d = getattr(gateway, key), getattr(direct, key)
        shared = [p for p in (*(f"p{q}" for q in PERCENTILES), "mean") if p in g and p in d]
        if shared:
            out[key] = {p: g[p] - d[p] for p in shared}
    return out


def build_report(load: dict[str, Any], summaries: Sequence[TargetSummary]) -> dict[str, Any]:
    report: dict[str, Any] = {"load": load,
                              "targets": {s.name: s.as_dict() for s in summaries}}
    by_name = {s.name: s for s in summaries}
    if "gateway" in by_name and "direct" in by_name:
        report["overhead_ms"] = overhead(by_name["gateway"], by_name["direct"])
    # other APIs' pairs, named gateway:<endpoint> and direct:<endpoint>
    others = {
        name.partition(":")[2]: overhead(s, by_name[f"direct:{name.partition(':')[2]}"])
        for name, s in by_name.items()
        if name.startswith("gateway:") and f"direct:{name.partition(':')[2]}" in by_name
    }
    if others:
        report["overhead_ms_by_endpoint"] = others
    if "limited" in by_name and "gateway" in by_name:
        # what a budget and a key's rate limit add: the same gateway, another key
        report["limits_cost_ms"] = overhead(by_name["limited"], by_name["gateway"])
    return report


def _cell(value: float | None, signed: bool = False) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def render_table(report: dict[str, Any]) -> str:
    """A fixed-width table: one row per target, then the overhead row."""
    targets = report["targets"].values()
    streams = any(t["ttft_ms"] for t in targets)
    head = ["target", "requests", "errors", "req/s", "p50 ms", "p95 ms", "p99 ms"]
    if streams:
        head += ["ttft p50", "ttft p95", "ttft p99"]
    rows = [head]
    percentile_keys = [f"p{q}" for q in PERCENTILES]
    for t in targets:
        row = [t["name"], str(t["requests"]), str(t["errors"]), f"{t['rps']:.1f}"]
        row += [_cell(t["latency_ms"].get(p)) for p in percentile_keys]
        if streams:
            row += [_cell(t["ttft_ms"].get(p)) for p in percentile_keys]
        rows.append(row)
    extras = {"overhead": report.get("overhead_ms")} | {
        f"overhead:{ep}": o for ep, o in report.get("overhead_ms_by_endpoint", {}).items()
    } | {"limits cost": report.get("limits_cost_ms")}
    for label, extra in extras.items():
        if not extra:
            continue
        row = [label, "", "", ""]
        row += [_cell(extra.get("latency_ms", {}).get(p), True) for p in percentile_keys]
        if streams:
            row += [_cell(extra.get("ttft_ms", {}).get(p), True) for p in percentile_keys]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w)
                       in enumerate(zip(r, widths, strict=True))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    cpu = [f"{t['name']} {t['client_cpu_s'] / t['requests'] * 1000:.2f} ms"
           for t in targets if t.get("client_cpu_s") is not None and t["requests"]]
    if cpu:
        lines.append("client CPU per request: " + ", ".join(cpu))
    for t in targets:
        if t.get("cpu_ms_per_request"):
            parts = ", ".join(f"{k} {v:.3f}" for k, v in t["cpu_ms_per_request"].items())
            lines.append(f"{t['name']} CPU ms per request: {parts}")
    for t in targets:
        if t["error_kinds"]:
            kinds = ", ".join(f"{k} x{n}" for k, n in t["error_kinds"].items())
            lines.append(f"{t['name']} errors: {kinds}")
    return "\n".join(lines)

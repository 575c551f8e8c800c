"""Each variant against the control, with a 95% confidence interval on the difference.

The interval is Welch's (unequal variances): difference of means ± t × standard error,
with the Welch-Satterthwaite degrees of freedom; t from the Cornish-Fisher expansion of
Student's t quantile (within 0.004 of the tables from 3 degrees of freedom up). A rate
(errors, truncations, thumbs up) is the mean of a 0/1 measure: the same interval serves.
Figures are statistics, not money: floats. An interval that excludes zero says the
variant differs from the control at the 5% level (per measure, no correction for
looking at several).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from statistics import NormalDist

LEVEL = 0.95


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    n: int
    mean: float | None
    var: float | None  # sample variance (n - 1); None below 2 values


@dataclasses.dataclass(frozen=True, slots=True)
class Difference:
    diff: float  # variant − control
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0


def t_quantile(p: float, df: float) -> float:
    z = NormalDist().inv_cdf(p)
    if math.isinf(df):
        return z
    z3, z5, z7, z9 = z**3, z**5, z**7, z**9
    return (z + (z3 + z) / (4 * df) + (5 * z5 + 16 * z3 + 3 * z) / (96 * df**2)
            + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * df**3)
            + (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / (92160 * df**4))  # fmt: skip


def welch(variant: Sample, control: Sample, level: float = LEVEL) -> Difference | None:
    """The interval on variant − control; None when either has fewer than 2 values."""
    if variant.n < 2 or control.n < 2 or variant.mean is None or control.mean is None:
        return None
    va, vb = (variant.var or 0.0) / variant.n, (control.var or 0.0) / control.n
    diff = variant.mean - control.mean
    se2 = va + vb
    if se2 <= 0:
        return Difference(diff, diff, diff)
    df = se2**2 / (va**2 / (variant.n - 1) + vb**2 / (control.n - 1))
    half = t_quantile(0.5 + level / 2, df) * math.sqrt(se2)
    return Difference(diff, diff - half, diff + half)


def compare(
    samples: Mapping[str, Mapping[str, Sample]], control: str
) -> dict[str, dict[str, Difference | None]]:
    """variant -> measure -> its difference against the control's (control left out)."""
    base = samples.get(control, {})
    return {
        variant: {m: welch(s, base[m]) if m in base else None for m, s in measures.items()}
        for variant, measures in samples.items()
        if variant != control
    }

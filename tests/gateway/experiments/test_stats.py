"""Welch's interval: its t quantiles and its answers on known samples."""

from __future__ import annotations

import statistics

import pytest

from gateway.experiments.stats import Sample, compare, t_quantile, welch


@pytest.mark.parametrize(("df", "t"), [(3, 3.182), (10, 2.228), (30, 2.042), (1000, 1.962)])
def test_t_quantiles_match_the_tables(df: int, t: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(t, abs=0.01)


def _sample(xs: list[float]) -> Sample:
    return Sample(len(xs), statistics.fmean(xs), statistics.variance(xs))


def test_welchs_interval_on_a_worked_example() -> None:
    # two groups whose interval is known: diff 2.0, se = sqrt(1/10 + 4/10), df ≈ 13.2
    a = Sample(10, 12.0, 1.0)
    b = Sample(10, 10.0, 4.0)
    d = welch(a, b)
    assert d is not None and d.diff == 2.0
    assert d.low == pytest.approx(2.0 - 2.156 * 0.7071, abs=0.01)
    assert d.excludes_zero


def test_an_interval_straddling_zero_says_so_and_tiny_samples_give_none() -> None:
    d = welch(_sample([1, 2, 3, 4]), _sample([1.5, 2.5, 3.0, 3.5]))
    assert d is not None and not d.excludes_zero
    assert welch(Sample(1, 1.0, None), Sample(5, 1.0, 1.0)) is None


def test_compare_leaves_the_control_out() -> None:
    samples = {"a": {"x": Sample(5, 1.0, 0.1)}, "b": {"x": Sample(5, 2.0, 0.1)}}
    out = compare(samples, "a")
    assert set(out) == {"b"} and out["b"]["x"] is not None and out["b"]["x"].diff == 1.0

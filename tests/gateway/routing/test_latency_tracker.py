"""Latency figures follow what each upstream does now."""

from __future__ import annotations

import pytest

from gateway.routing.latency_tracker import LatencyTracker


def test_first_samples_are_a_plain_mean() -> None:
    t = LatencyTracker(alpha=0.2)
    t.observe("m", 1.0)
    t.observe("m", 3.0)
    assert t.figures("m").latency_s == pytest.approx(2.0)


def test_the_average_follows_a_change_within_a_few_dozen_requests() -> None:
    t = LatencyTracker(alpha=0.2)
    for _ in range(50):
        t.observe("m", 0.2)
    for _ in range(20):
        t.observe("m", 2.0)
    assert t.latencies()["m"] == pytest.approx(2.0, abs=0.05)


def test_ttft_is_tracked_apart_and_unmeasured_models_are_absent() -> None:
    t = LatencyTracker()
    t.observe("a", 1.5, ttft_s=0.3)
    t.observe("b", 0.9)
    assert t.figures("a").ttft_s == pytest.approx(0.3)
    assert t.figures("b").ttft_s is None
    assert t.figures("c").samples == 0
    assert set(t.latencies()) == {"a", "b"}


def test_negative_latency_is_refused() -> None:
    with pytest.raises(ValueError):
        LatencyTracker().observe("m", -1.0)

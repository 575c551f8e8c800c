import subprocess
from decimal import Decimal

from gateway.metrics.catalog import (
    ALL_METRICS,
    COST_USD,
    REQUEST_DURATION,
    REQUESTS,
    exported_sample_names,
)
from gateway.metrics.exposition import render_totals
from gateway.metrics.snapshot import SeriesStore, Totals, merge_totals
from tests.fixtures.exposition_reader import families, samples, total


def _totals() -> Totals:
    store = SeriesStore()
    store.inc(REQUESTS, ("gpt-4.1", "openai", "", "billing", "2xx"), 3)
    store.inc(COST_USD, ("gpt-4.1", "openai", "", "billing"), Decimal("0.000001"))
    store.inc(COST_USD, ("gpt-4.1", "openai", "", "billing"), Decimal("12.345678"))
    for ms in (40, 300, 2500):
        store.observe_ms(REQUEST_DURATION, ("gpt-4.1", "openai", "2xx"), ms)
    snap = store.snapshot("s", 0.0, False, 0.0)
    return merge_totals(Totals(), [snap], [snap])


def test_every_catalog_family_is_declared_even_without_samples():
    declared = families(render_totals(Totals()))
    assert set(declared) == {m.name for m in ALL_METRICS}
    assert all(declared[m.name] == m.kind.value for m in ALL_METRICS)


def test_counters_are_rendered_with_total_suffix_and_exact_sums():
    text = render_totals(_totals())
    assert total(text, "costgate_requests_total", model="gpt-4.1", app="billing") == 3
    assert total(text, "costgate_cost_usd_total") == 12.345679


def test_histograms_are_cumulative_with_count_and_sum_in_seconds():
    text = render_totals(_totals())
    buckets = {
        labels["le"]: v
        for n, labels, v in samples(text)
        if n == "costgate_request_duration_seconds_bucket"
    }
    assert buckets["0.05"] == 1
    assert buckets["0.5"] == 2
    assert buckets["4.0"] == 3
    assert buckets["+Inf"] == 3
    assert total(text, "costgate_request_duration_seconds_count") == 3
    assert total(text, "costgate_request_duration_seconds_sum") == 2.84


def test_only_catalog_names_are_exported():
    names = {n for n, _, _ in samples(render_totals(_totals()))}
    assert names <= exported_sample_names()


def test_promtool_finds_no_problem_in_the_exposition():
    result = subprocess.run(
        ["promtool", "check", "metrics"],
        input=render_totals(_totals()),
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == b""

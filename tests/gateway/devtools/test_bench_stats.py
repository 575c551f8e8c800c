import math

import pytest

from gateway.devtools.bench_stats import (
    Sample,
    build_report,
    overhead,
    percentile,
    render_table,
    summarize,
)


def test_percentile_interpolates_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(list(range(1, 101)), 99) == pytest.approx(99.01)
    assert percentile([7.0], 95) == 7.0


def test_percentile_of_nothing_is_nan():
    assert math.isnan(percentile([], 50))


def test_percentile_does_not_need_sorted_input():
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0


def test_summary_counts_errors_but_keeps_them_out_of_latency():
    samples = [Sample(0.010), Sample(0.020), Sample(0.030),
               Sample(0.001, error="http_503"), Sample(0.002, error="http_503"),
               Sample(5.0, error="timeout")]
    s = summarize("gateway", "http://x/v1/chat/completions", "m", samples, duration_s=2.0)
    assert s.requests == 6 and s.errors == 3
    assert s.error_kinds == {"http_503": 2, "timeout": 1}
    assert s.rps == 3.0
    assert s.latency_ms["p50"] == pytest.approx(20.0)
    assert s.latency_ms["max"] == pytest.approx(30.0)
    assert s.ttft_ms == {}


def test_summary_has_ttft_percentiles_for_streams():
    samples = [Sample(0.1, ttft_s=0.01 * i) for i in range(1, 11)]
    s = summarize("direct", "u", "m", samples, 1.0)
    assert s.ttft_ms["p50"] == pytest.approx(55.0)
    assert s.ttft_ms["p99"] == pytest.approx(99.1)


def test_overhead_is_gateway_minus_direct_per_percentile():
    direct = summarize("direct", "u", "m", [Sample(0.010, 0.004)] * 10, 1.0)
    gateway = summarize("gateway", "u", "m", [Sample(0.013, 0.006)] * 10, 1.0)
    extra = overhead(gateway, direct)
    assert extra["latency_ms"]["p50"] == pytest.approx(3.0)
    assert extra["latency_ms"]["p99"] == pytest.approx(3.0)
    assert extra["ttft_ms"]["p95"] == pytest.approx(2.0)


def test_report_has_overhead_only_with_both_targets():
    direct = summarize("direct", "u", "m", [Sample(0.010)], 1.0)
    gateway = summarize("gateway", "u", "m", [Sample(0.012)], 1.0)
    assert "overhead_ms" in build_report({}, [direct, gateway])
    assert "overhead_ms" not in build_report({}, [gateway])


def test_table_shows_each_target_the_overhead_and_the_errors():
    direct = summarize("direct", "u", "m", [Sample(0.010, 0.002)] * 4, 1.0)
    gateway = summarize("gateway", "u", "m",
                        [Sample(0.012, 0.003)] * 3 + [Sample(0.1, error="http_502")], 1.0)
    table = render_table(build_report({}, [direct, gateway]))
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["target", "requests", "errors", "req/s"]
    assert "ttft" in lines[0]
    assert lines[2].split()[:5] == ["direct", "4", "0", "4.0", "10.00"]
    assert lines[4].split()[:2] == ["overhead", "+2.00"]
    assert "gateway errors: http_502 x1" in table


def test_table_shows_the_clients_cpu_per_request_when_measured():
    s = summarize("direct", "u", "m", [Sample(0.01)] * 4, 1.0, client_cpu_s=0.002)
    assert "client CPU per request: direct 0.50 ms" in render_table(build_report({}, [s]))


def test_table_leaves_ttft_out_without_streams():
    s = summarize("direct", "u", "m", [Sample(0.01)], 1.0)
    assert "ttft" not in render_table(build_report({}, [s]))


def test_each_api_gets_its_own_overhead_row_side_by_side():
    def target(name: str, seconds: float):
        return summarize(name, "u", "m", [Sample(seconds)] * 10, duration_s=1.0)

    report = build_report({}, [target("direct", 0.010), target("gateway", 0.011),
                               target("direct:responses", 0.010),
                               target("gateway:responses", 0.0125)])
    assert report["overhead_ms"]["latency_ms"]["p50"] == pytest.approx(1.0)
    by_endpoint = report["overhead_ms_by_endpoint"]
    assert by_endpoint["responses"]["latency_ms"]["p50"] == pytest.approx(2.5)
    table = render_table(report)
    assert "overhead:responses" in table and "+2.50" in table


def test_the_limited_target_is_compared_with_the_plain_gateway() -> None:
    from gateway.devtools.bench_stats import Sample, build_report, render_table, summarize

    plain = summarize("gateway", "u", "m", [Sample(0.002)] * 10, 1.0, 0.1)
    limited = summarize("limited", "u", "m", [Sample(0.0025)] * 10, 1.0, 0.1)
    report = build_report({}, [plain, limited])
    assert report["limits_cost_ms"]["latency_ms"]["p50"] == pytest.approx(0.5)
    assert "limits cost" in render_table(report)

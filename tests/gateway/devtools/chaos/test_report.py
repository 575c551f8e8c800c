"""The printed tables: aligned columns, notes under them, soak growth arithmetic."""

from __future__ import annotations

import time

from gateway.devtools.chaos.report import (
    ProcessSample,
    ScenarioResult,
    controller_events,
    growth,
    logged_at,
    render_growth,
    render_samples,
    render_table,
)


def test_table_has_one_aligned_line_per_scenario_then_the_notes() -> None:
    ok = ScenarioResult("db-cut", sent=1500, answered_2xx=1500, rows=1500, seconds=91.4,
                        notes=["PostgreSQL cut for 60.0 s"])
    bad = ScenarioResult("replica-kill", sent=12, answered_2xx=11, answered_5xx=1, rows=9,
                         lost=2, failures=["2 answered 2xx requests have no row"])
    broken = ScenarioResult("down", error="StackError: boom")
    lines = render_table([ok, bad, broken]).splitlines()
    assert lines[0].split() == ["scenario", "sent", "2xx", "4xx", "5xx", "no", "answer",
                                "rows", "lost", "dup", "differ", "s", "result"]
    assert lines[2].split() == ["db-cut", "1500", "1500", "0", "0", "0", "1500", "0", "0",
                                "0", "91", "ok"]
    assert lines[3].split()[-1] == "FAIL" and lines[4].split()[-1] == "ERROR"
    # numbers right-aligned under their headers: every table line is as long as the header
    assert len({len(line) for line in lines[:2]}) == 1
    assert lines[3].index("12") + 2 == lines[0].index("sent") + 4
    assert "  db-cut: PostgreSQL cut for 60.0 s" in lines
    assert "  replica-kill: FAIL 2 answered 2xx requests have no row" in lines
    assert "  down: ERROR StackError: boom" in lines


def test_verdicts() -> None:
    assert ScenarioResult("a").verdict == "ok"
    assert ScenarioResult("a", failures=["x"]).verdict == "FAIL"
    assert ScenarioResult("a", failures=["x"], error="e").verdict == "ERROR"


def test_growth_is_first_sample_to_last_per_pid() -> None:
    mib = 2**20
    samples = [
        ProcessSample(60, 11, 200 * mib, 40), ProcessSample(30, 11, 100 * mib, 30),
        ProcessSample(90, 11, 110 * mib, 33), ProcessSample(30, 12, 50 * mib, 20),
    ]  # fmt: skip
    first, second = growth(samples)
    assert (first.pid, first.first_rss, first.last_rss, first.fd_delta, first.samples) == (
        11, 100 * mib, 110 * mib, 3, 3)
    assert round(first.rss_pct, 6) == 10.0
    assert (second.rss_pct, second.fd_delta, second.samples) == (0.0, 0, 1)
    assert ("pid 11: RSS 100.0 -> 110.0 MiB (+10.0%), fds +3 (not sockets +3), 3 samples"
            in render_growth([first, second]))
    table = render_samples(samples).splitlines()
    assert len(table) == 4  # header and t = 30, 60, 90
    assert table[1].split()[:4] == ["30", "100.0", "/", "30"]
    assert table[2].split()[-1] == "-"  # pid 12 had no sample at 60 s


def test_growth_compares_the_samples_taken_at_rest_when_there_are_two() -> None:
    mib = 2**20
    samples = [
        ProcessSample(0, 11, 100 * mib, 50, sockets=20, at_rest=True),
        ProcessSample(60, 11, 130 * mib, 140, sockets=100),  # under load: not an end
        ProcessSample(120, 11, 102 * mib, 53, sockets=22, at_rest=True),
        ProcessSample(130, 11, 150 * mib, 90, sockets=40),  # after the rest: still not
    ]  # fmt: skip
    (g,) = growth(samples)
    assert (g.first_rss, g.last_rss, g.fd_delta, g.other_fd_delta, g.at_rest) == (
        100 * mib, 102 * mib, 3, 1, True)
    assert "fds +3 (not sockets +1), 4 samples, ends at rest" in render_growth([g])
    (lone,) = growth(samples[:2])  # one sample at rest: first to last, as before
    assert (lone.last_rss, lone.at_rest) == (130 * mib, False)


def test_controller_events_are_the_replica_endings_serve_forced_since_a_time() -> None:
    since = time.mktime(time.strptime("2026-12-05 14:28:46", "%Y-%m-%d %H:%M:%S"))
    lines = [
        "INFO 2026-12-05 14:28:40,001 controller 1 -- Replica(id='a') did not shut down "
        "after grace period, force-killing it.",  # before `since`
        "INFO 2026-12-05 14:28:46,388 controller 1 -- Deleting app 'costgate'.",
        "WARNING 2026-12-05 14:28:50,120 controller 1 -- Replica b failed health check, "
        "stopping it.",
        "INFO 2026-12-05 14:28:51,000 controller 1 -- Replica(id='c') passed the health "
        "check after 3 tries.",
        "WARNING 2026-12-05 14:29:02,500 controller 1 -- Replica(id='d') died before "
        "controller could recover it.",
        "  File \"replica.py\", line 3, in died",  # a traceback's line: no time, not counted
    ]
    found = controller_events(lines, since)
    assert [line.split(" -- ")[1][:20] for line in found] == [
        "Replica b failed hea", "Replica(id='d') died",
    ]
    assert logged_at(lines[1]) == since and logged_at(lines[-1]) == 0.0

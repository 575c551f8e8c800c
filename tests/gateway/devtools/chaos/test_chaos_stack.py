"""Every chaos scenario at its smallest size against one real stack (`costgate up` on Ray,
the sim, a ledger behind the suite's proxy), as `costgate chaos --quick` runs them.

A scenario's own expectations (no 5xx where none may be, no row lost or duplicated, a
kill losing at most one flush interval's rows) are what each test asserts: a failure
names the scenario's failing expectation and its notes. Runtime: about 5-6 minutes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.devtools.chaos.bookkeeping import QUICK, Context
from gateway.devtools.chaos.report import ScenarioResult, render_table
from gateway.devtools.chaos.scenarios import SCENARIOS, restore
from gateway.devtools.chaos.soak import SoakSpec, run_soak
from gateway.devtools.chaos.stack import ChaosStack
from gateway.domain.environment import EXAMPLE_CONFIG

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Context]:
    workdir = Path(tmp_path_factory.mktemp("chaos"))
    stack = ChaosStack(EXAMPLE_CONFIG, workdir)
    try:
        stack.start(print)
        ctx = Context(stack, QUICK, f"t{os.getpid()}")
        for name in SCENARIOS:
            ctx.key(name)
        ctx.warm_keys()
        yield ctx
    finally:
        stack.stop()


def run(ctx: Context, name: str) -> ScenarioResult:
    result = SCENARIOS[name](ctx)
    print(render_table([result]))
    if name != "down":
        restore(ctx, replicas=2)
    return result


def check(result: ScenarioResult) -> None:
    assert result.error is None
    assert result.sent > 0
    assert result.verdict == "ok", render_table([result])


def test_soak_measures_growth_between_samples_at_rest(chaos: Context) -> None:
    # first in the module: the stack's two replicas are settled (after a scenario's
    # restore, Serve may still be replacing them, and the soak would see new PIDs)
    spec = SoakSpec(duration_s=12, rps=20, sample_every_s=4, warmup_s=4, concurrency=8)
    result, samples, grown = run_soak(chaos, spec)
    print(render_table([result]))
    assert result.error is None and result.sent > 0
    assert result.lost == 0 and result.duplicated == 0
    lived_through = set()  # a replica Serve replaced meanwhile has one end under load
    for pid in {s.pid for s in samples}:
        series = sorted((s for s in samples if s.pid == pid), key=lambda s: s.at_s)
        if len(series) >= 2 and series[0].at_rest and series[-1].at_rest:
            lived_through.add(pid)  # the two ends growth compares
        assert not any(s.at_rest for s in series[1:-1])  # under load in between
        assert all(0 < s.sockets < s.fds for s in series)  # a replica holds sockets and more
    assert len(lived_through) >= 2  # both replicas of the stack, from rest to rest
    assert {g.pid for g in grown if g.at_rest} == lived_through


def test_schemathesis(chaos: Context) -> None:
    result = run(chaos, "schemathesis")
    check(result)
    assert result.answered_4xx > 0  # negative cases reached the validation


def test_hostile_bodies(chaos: Context) -> None:
    result = run(chaos, "hostile")
    assert result.error is None
    not_4xx = {case for case, status in result.details.items()
               if not (isinstance(status, int) and 400 <= status < 500)}  # fmt: skip
    assert not_4xx == set(), render_table([result])
    assert result.duplicated == 0 and result.rows <= result.sent  # at most one row each
    check(result)  # the giant chunked body's cost to the replicas' RSS included


def test_upstream_faults(chaos: Context) -> None:
    check(run(chaos, "upstream-faults"))


def test_database_cut(chaos: Context) -> None:
    result = run(chaos, "db-cut")
    check(result)
    assert result.rows >= result.answered_2xx > 0


def test_replica_kill(chaos: Context) -> None:
    check(run(chaos, "replica-kill"))


def test_replica_kill_during_database_outage(chaos: Context) -> None:
    check(run(chaos, "replica-kill-db-down"))


def test_redeploy(chaos: Context) -> None:
    check(run(chaos, "redeploy"))


def test_redeploy_during_a_database_outage(chaos: Context) -> None:
    result = run(chaos, "redeploy-db-down")
    check(result)
    assert "unreachable" in result.notes[0]  # `up` said what it skipped


def test_spool_disk_full(chaos: Context) -> None:
    check(run(chaos, "spool-disk-full"))


def test_down_last(chaos: Context) -> None:
    result = run(chaos, "down")
    check(result)
    assert result.no_answer > 0  # the load outlived the gateway

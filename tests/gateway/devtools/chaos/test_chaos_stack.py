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


def test_schemathesis(chaos: Context) -> None:
    result = run(chaos, "schemathesis")
    check(result)
    assert result.answered_4xx > 0  # negative cases reached the validation


# Hostile bodies that are knowingly not refused; any other answering other than 4xx
# fails here, and a fix shows up (remove its name).
# A lone surrogate inside message text is passed on (text is not validated; the upstream
# decides); names are refused. Scalar bodies and NaN are 400 since they were found here.
KNOWN_NOT_4XX = {"lone-surrogate-content"}


def test_hostile_bodies(chaos: Context) -> None:
    result = run(chaos, "hostile")
    assert result.error is None
    not_4xx = {case for case, status in result.details.items()
               if not (isinstance(status, int) and 400 <= status < 500)}  # fmt: skip
    assert not_4xx == KNOWN_NOT_4XX, render_table([result])
    assert result.duplicated == 0 and result.rows <= result.sent  # at most one row each


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


@pytest.mark.xfail(
    reason="open finding: during a redeploy some requests with a valid key get 401 "
    "(37 of 181 here, 12-18 s into the scenario); cause not yet found",
    strict=False,
)
def test_redeploy(chaos: Context) -> None:
    check(run(chaos, "redeploy"))


def test_spool_disk_full(chaos: Context) -> None:
    check(run(chaos, "spool-disk-full"))


@pytest.mark.xfail(
    reason="open finding: `costgate down` under load lost 4-6 answered rows at default "
    "size (Serve force-advances its drain after 30 s); none at this size so far",
    strict=False,
)
def test_down_last(chaos: Context) -> None:
    result = run(chaos, "down")
    check(result)
    assert result.no_answer > 0  # the load outlived the gateway

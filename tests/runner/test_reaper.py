"""A test run stopped from outside (a time limit's SIGTERM, or a SIGKILL) leaves no
process of its own behind: no Ray, PostgreSQL, sim or browser (tests/runner/reaper.py).

Each case starts a pytest of its own on tests/runner/held_run.py (a Ray head from
`costgate up`, the embedded PostgreSQL, the sim, Chromium; the SIGKILL case all but
Ray), checks that every kind is running, kills that pytest, and waits for every process
carrying its run id to be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.runner.held_run import READY_ENV
from tests.runner.reaper import RUN_ENV, run_processes

pytestmark = [pytest.mark.ray, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[2]
HELD_RUN = REPO / "tests" / "runner" / "held_run.py"
KINDS = {
    "ray": lambda cmd: "gcs_server" in cmd or "raylet" in cmd,
    "postgres": lambda cmd: "pgserver" in cmd and "postgres" in cmd,
    "sim": lambda cmd: "gateway.devtools.sim" in cmd,
    "browser": lambda cmd: "chromium" in cmd,
}


def _commands(procs: list[psutil.Process]) -> list[str]:
    out = []
    for proc in procs:
        try:
            out.append(" ".join(proc.cmdline()) or proc.name())
        except psutil.Error:
            continue
    return out


@pytest.mark.parametrize(
    ("signum", "held", "kinds"),
    [
        # a time limit's SIGTERM: pytest tears its fixtures down, the watchdog checks
        (signal.SIGTERM, "every_kind", KINDS),
        # no teardown at all: the watchdog alone (Ray's part of it is what `costgate
        # down` uses, tests/gateway/control/nodes; a second Ray head here costs a minute)
        (signal.SIGKILL, "all_but_ray", {k: v for k, v in KINDS.items() if k != "ray"}),
    ],
    ids=["sigterm", "sigkill"],
)
def test_a_killed_run_leaves_no_process_of_its_own(
    tmp_path: Path, signum: int, held: str, kinds: dict[str, Any]
) -> None:
    ready = tmp_path / "ready"
    log = tmp_path / "held-run.log"
    # a run of its own: not this run's id, not this xdist worker's identity, and the
    # embedded PostgreSQL rather than this run's server
    env = {
        k: v for k, v in os.environ.items()
        if k not in (RUN_ENV, "DATABASE_URL") and not k.startswith("PYTEST_")
    }  # fmt: skip
    env[READY_ENV] = str(ready)
    with log.open("wb") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s",
             "--basetemp", str(tmp_path / "base"), str(HELD_RUN), "-k", held],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not ready.exists():
            assert run.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, "the held run never got ready"
            time.sleep(0.2)
        run_id = ready.read_text()
        running = _commands(run_processes(run_id))
        missing = [kind for kind, is_kind in kinds.items() if not any(map(is_kind, running))]
        assert not missing, f"not running, so not proven: {missing}\n{running}"

        run.send_signal(signum)
        assert run.wait(timeout=240) != 0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()

    deadline = time.monotonic() + 60
    while (left := _commands(run_processes(run_id))) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, "left behind by the killed run:\n" + "\n".join(left)

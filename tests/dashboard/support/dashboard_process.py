"""A real `costgate dashboard` process for the browser tests: started in a session of its
own on a given port, yielded once Streamlit reports healthy, stopped by its process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import pytest

from dashboard.auth import MIN_PBKDF2_ITERATIONS, hash_password
from tests.fixtures.ports import port_is_free


def users_value(users: Iterable[tuple[str, str, str]]) -> str:
    """COSTGATE_DASHBOARD_USERS for (name, role, password) triples."""
    return ",".join(
        f"{name}:{role}:{hash_password(password, MIN_PBKDF2_ITERATIONS)}"
        for name, role, password in users
    )


@contextlib.contextmanager
def running_dashboard(port: int, env: dict[str, str], config_path: Path,
                      log: Path) -> Iterator[str]:  # fmt: skip
    # taken, Streamlit would quietly serve on the next port and the test would find
    # whatever listens here
    assert port_is_free(port), f"port {port} is taken"
    command = [
        *(sys.executable, "-m", "gateway.cli", "dashboard"),
        *("--port", str(port), "--config", str(config_path)),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/_stcore/health", timeout=2).status_code == 200:
                    break
            assert proc.poll() is None, log.read_text()
            time.sleep(0.3)
        else:
            pytest.fail(f"the dashboard did not start:\n{log.read_text()}")
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and nothing else
        proc.wait(15)

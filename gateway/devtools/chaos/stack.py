"""The stack a chaos run breaks: the sim, a ledger behind a cuttable proxy, and the gateway
started with `costgate up` on ports and a state dir of its own, as an operator would.

The ledger is a fresh migrated database on the server DATABASE_URL names (dropped at the
end), or, without DATABASE_URL, an embedded PostgreSQL under the run's work dir (stopped
at the end). Either way the replicas reach it only through `DatabaseProxy`, and the
suite reads it directly, so an outage it makes never blinds its own accounting.
Nothing is stopped by name: `costgate down` of this stack's config stops exactly the
Ray head it started (by the temp dir's processes), the sim is our child process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import httpx
import psutil
import psycopg
import yaml
from sqlalchemy import make_url

from db.embedded import ensure_embedded, stop_embedded
from db.engine import libpq_url, normalize_url
from db.keys import create_key
from db.migrate import upgrade
from gateway.control.cluster import ClusterPaths
from gateway.control.declarative import live_routing
from gateway.control.ray_processes import send_signal, wait_gone
from gateway.control.serve_admin import ServeAdmin, ServeAdminError
from gateway.control.serve_config import INGRESS_DEPLOYMENT, serve_config
from gateway.devtools.chaos.proxy import DatabaseProxy
from gateway.devtools.sim.process import SimProcess
from gateway.domain.config import load_config
from gateway.domain.environment import environment, ray_token_file

PORT_LOCKS = Path("/tmp/costgate-chaos-ports")
# below the tests' blocks (18000-18900) and the Ray worker range (20000-29999)
PORT_BASES = range(15000, 17901, 100)
GATEWAY, HEAD, DASHBOARD, METRICS, SIM_FIRST = 0, 10, 15, 16, 30
OFFSETS = (*range(0, 20), *range(SIM_FIRST, SIM_FIRST + 10))
PROVIDER_SECRET = "sk-chaos-provider-0b7e"
# short upstream latencies: the suite measures the gateway and the ledger, not the sim
SIM_BEHAVIOUR = {
    "default": {"ttft_ms": 5, "per_token_ms": 1, "jitter": 0.1, "completion_tokens": [8, 32]},
    "models": {},
    "faults": {},
    "seed": 4321,
}
# variables of the caller's shell that would point the stack at someone else's cluster
FOREIGN_ENV = (
    "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS", "COSTGATE_ADMIN_KEY",
    "COSTGATE_GATEWAY_URL", "COSTGATE_RAY_DASHBOARD_URL", "COSTGATE_CONFIG",
    "COSTGATE_API_KEY",
)  # fmt: skip


class StackError(RuntimeError):
    pass


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def claim_ports() -> tuple[int, IO[str]]:
    """A block of ports nobody uses, held by a file lock for as long as the run lives."""
    PORT_LOCKS.mkdir(exist_ok=True)
    for base in PORT_BASES:
        lock = open(PORT_LOCKS / f"{base}.lock", "w")  # noqa: SIM115 - held for the run
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        if all(_port_free(base + o) for o in OFFSETS):
            return base, lock
        lock.close()
    raise StackError(f"no free port block in {PORT_BASES.start}-{PORT_BASES.stop}")


def gateway_config(base: dict[str, Any], sim: SimProcess, port_base: int) -> dict[str, Any]:
    """The base config on this run's ports, with keys required and every provider on the sim."""
    config = dict(base)
    config["gateway"] = {
        **base.get("gateway", {}),
        "port": port_base + GATEWAY,
        "num_replicas": 2,
        "require_keys": True,
        "allow_anonymous": False,
        "ray": {
            "head_port": port_base + HEAD,
            "dashboard_port": port_base + DASHBOARD,
            "metrics_export_port": port_base + METRICS,
        },
    }
    config["gateway"].pop("autoscaling", None)  # a fixed set of replicas to count and kill
    config["providers"] = [
        # a hung upstream must fail well within a scenario
        {**p, "base_url": sim.provider_url(p["name"]),
         "timeouts": {"connect": 3, "read": 8, "total": 15}}
        for p in base["providers"]
    ]  # fmt: skip
    config["sim"] = {**base.get("sim", {}), **SIM_BEHAVIOUR}
    return config


@dataclasses.dataclass
class Ledger:
    """The database the gateway writes (`url`, reached directly) and how to get rid of it."""

    url: str
    scratch_name: str | None = None
    server_url: str | None = None
    pgdata: Path | None = None

    @classmethod
    def create(cls, workdir: Path) -> Ledger:
        server = environment().database_url_value
        if server:
            name = f"costgate_chaos_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(libpq_url(server), autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            url = make_url(normalize_url(server)).set(database=name)
            ledger = cls(url.render_as_string(hide_password=False), name, server)
        else:
            pgdata = workdir / "pg"
            # pgserver runs the server as its own user when we are root: it must reach this
            workdir.chmod(0o755)
            ledger = cls(normalize_url(ensure_embedded(pgdata)), pgdata=pgdata)
        upgrade(ledger.url)
        return ledger

    def drop(self) -> None:
        if self.scratch_name and self.server_url:
            with psycopg.connect(libpq_url(self.server_url), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{self.scratch_name}" WITH (FORCE)')
        if self.pgdata is not None:
            stop_embedded(self.pgdata)


class ChaosStack:
    """Everything a run starts, stopped in reverse order by `stop()` (idempotent)."""

    def __init__(self, base_config: Path, workdir: Path) -> None:
        self.base_config = base_config
        self.workdir = workdir
        self.state_dir = workdir / "state"
        self.port_base, self._port_lock = claim_ports()
        self.sim: SimProcess | None = None
        self.ledger: Ledger | None = None
        self.proxy: DatabaseProxy | None = None
        self.config_path = workdir / "costgate.yaml"
        self.config: dict[str, Any] = {}
        self.admin_key = ""
        self.env: dict[str, str] = {}
        self.up_seconds: float | None = None
        self._gateway_up = False

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, log: Any = print) -> ChaosStack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        base = yaml.safe_load(self.base_config.read_text())
        sim_yaml = self.workdir / "sim.yaml"
        sim_yaml.write_text(yaml.safe_dump({**base, "sim": {**base.get("sim", {}),
                                                           **SIM_BEHAVIOUR}}))
        first = self.port_base + SIM_FIRST
        self.sim = SimProcess.start(sim_yaml, range(first, first + 10),
                                    log_path=self.workdir / "sim.log")
        log(f"sim at {self.sim.base_url}")
        self.ledger = Ledger.create(self.workdir)
        self.proxy = DatabaseProxy(self.ledger.url).start()
        where = (f"database {self.ledger.scratch_name}" if self.ledger.scratch_name
                 else f"embedded at {self.ledger.pgdata}")  # fmt: skip
        log(f"ledger {where}, replicas reach it through 127.0.0.1:{self.proxy.port}")
        self.config = gateway_config(base, self.sim, self.port_base)
        self.write_config(self.config)
        self.admin_key, _ = create_key(self.ledger.url, "chaos-admin", is_admin=True)
        env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
        env.update(DATABASE_URL=self.proxy.url, COSTGATE_STATE_DIR=str(self.state_dir),
                   COSTGATE_ADMIN_KEY=self.admin_key, PYTHONUNBUFFERED="1")
        for provider in base["providers"]:
            if provider.get("api_key_env"):
                env[provider["api_key_env"]] = PROVIDER_SECRET
        self.env = env
        self.up()
        log(f"gateway ready at {self.gateway_url} in {self.up_seconds:.1f} s")
        return self

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            if self._gateway_up or self.state_dir.exists():
                self.down()
        if self.proxy is not None:
            self.proxy.stop()
        if self.sim is not None:
            self.sim.stop()
        if self.ledger is not None:
            with contextlib.suppress(Exception):
                self.ledger.drop()
        fcntl.flock(self._port_lock, fcntl.LOCK_UN)
        self._port_lock.close()

    def remove_workdir(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- the gateway ------------------------------------------------------------------------

    def write_config(self, config: dict[str, Any], path: Path | None = None) -> Path:
        path = path or self.config_path
        path.write_text(yaml.safe_dump(config))
        load_config(path)  # a bad edit fails here, not as a replica crash loop
        self.config, self.config_path = config, path
        return path

    def cli(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        """`costgate ARGS` as a user runs it, against this stack."""
        cmd = [sys.executable, "-m", "gateway.cli", *args]
        if args and args[0] in ("up", "down"):
            cmd += ["--config", str(self.config_path)]
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)

    def up(self, attempts: int = 4) -> None:
        """`costgate up`; again if it timed out talking to Ray: on 2 busy cores (a load
        average of 30 was seen here) Ray's dashboard can take longer than `up`'s 10 s to
        list the applications. The next `up` finds the head running and only deploys,
        once the dashboard answers again."""
        started = time.monotonic()
        for attempt in range(1, attempts + 1):
            result = self.cli("up", "--timeout", "240")
            self._gateway_up = True
            if result.returncode == 0:
                self.up_seconds = time.monotonic() - started
                return
            if "timed out" not in result.stderr or attempt == attempts:
                raise StackError(f"costgate up failed:\n{result.stdout[-2000:]}"
                                 f"{result.stderr[-3000:]}")  # fmt: skip
            self._wait_dashboard(timeout_s=120)

    def _wait_dashboard(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self.admin() as admin:
            while time.monotonic() < deadline:
                with contextlib.suppress(ServeAdminError):
                    admin.instance(timeout_s=30)
                    return
                time.sleep(2)

    def redeploy_via_serve(self, config_path: Path) -> None:
        """What `costgate up` does to a running head, without the database it also needs
        (migrations, price sync): PUT the declarative config to Serve's REST API, with the
        live routing kept. For redeploys during an outage, when `up` cannot run."""
        cfg = load_config(config_path)
        with self.admin() as admin:
            instance = admin.instance(timeout_s=10)
            routing = live_routing(instance, self.app_name, cfg).settings
            admin.put(serve_config(cfg, config_path=config_path, state_dir=self.state_dir,
                                   routing=routing), timeout_s=60)  # fmt: skip
        self.config_path = config_path

    def down(self) -> subprocess.CompletedProcess[str]:
        result = self.cli("down")
        self._gateway_up = False
        return result

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.port_base + GATEWAY}"

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.port_base + DASHBOARD}"

    @property
    def app_name(self) -> str:
        return str(self.config.get("gateway", {}).get("app_name", "costgate"))

    def new_key(self, app: str) -> str:
        assert self.ledger is not None
        key, _ = create_key(self.ledger.url, app, "chaos")
        return key

    def admin(self) -> ServeAdmin:
        return ServeAdmin(self.dashboard_url, token=_read(ray_token_file(self.state_dir)))

    def replica_pids(self) -> list[int]:
        """PIDs of the gateway's RUNNING replicas, as Serve's controller reports them."""
        try:
            with self.admin() as admin:
                apps = admin.instance(timeout_s=10).get("applications") or {}
        except ServeAdminError:
            return []
        deployment = (apps.get(self.app_name) or {}).get("deployments", {}).get(
            INGRESS_DEPLOYMENT, {}
        )
        return sorted(
            int(r["pid"]) for r in deployment.get("replicas", [])
            if r.get("state") == "RUNNING" and r.get("pid")
        )  # fmt: skip

    def wait_replicas(self, count: int, *, exclude: frozenset[int] = frozenset(),
                      timeout_s: float = 120) -> list[int]:
        """Wait until `count` replicas run, none of them in `exclude`, and /readyz answers."""
        deadline = time.monotonic() + timeout_s
        pids: list[int] = []
        while time.monotonic() < deadline:
            pids = self.replica_pids()
            if len(pids) >= count and not exclude & set(pids) and self.ready():
                return pids
            time.sleep(1)
        raise StackError(f"replicas did not come back within {timeout_s:.0f} s (running: {pids})")

    def kill_replicas(self, pids: Iterable[int], timeout_s: float = 60) -> float:
        """SIGKILL these replicas' processes and wait until they are gone; returns the
        seconds it took."""
        started, procs = time.monotonic(), []
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                procs.append(psutil.Process(pid))
        send_signal(procs, signal.SIGKILL)
        if left := wait_gone(procs, timeout_s):
            raise StackError(f"replicas {[p.pid for p in left]} still run after {timeout_s:.0f} s")
        return time.monotonic() - started

    def controller_log(self) -> list[str]:
        """The lines of Serve's controller log (`report.controller_events` picks from them).
        A replica's own log keeps our warnings, but Serve's INFO lines die with it."""
        logs = ClusterPaths(self.state_dir).temp_dir / "session_latest" / "logs" / "serve"
        lines: list[str] = []
        for path in sorted(logs.glob("controller_*.log")):
            with contextlib.suppress(OSError):
                lines += path.read_text(errors="replace").splitlines()
        return lines

    def ready(self) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{self.gateway_url}/readyz", timeout=3).status_code == 200
        return False

    def writer_stats(self) -> dict[str, float]:
        """The ledger writers' counters summed over live replicas, from /metrics."""
        from prometheus_client.parser import text_string_to_metric_families

        try:
            text = httpx.get(f"{self.gateway_url}/metrics", timeout=10).text
        except httpx.HTTPError:
            return {}
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            if family.name.startswith("costgate_record_writer_"):
                name = family.name.removeprefix("costgate_record_writer_")
                out[name] = sum(s.value for s in family.samples if not s.name.endswith("_created"))
        return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None

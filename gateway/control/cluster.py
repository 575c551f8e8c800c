"""`costgate up` / `costgate down`: a Ray head of our own, and the gateway deployed on it.

Ray's defaults do not fit these machines (Redis holds 6379, and Ray's own stop command
kills every Ray on the host, other users' included), so the head gets its own ports,
temp dir and session, and `down` stops exactly its processes once Serve has shut the
replicas down gracefully (they flush their ledger buffers then).

The head always runs with Ray's token auth (`RAY_AUTH_MODE=token` in the environment of
`ray start`, which every Ray process it starts inherits): without it anyone who reaches
the dashboard port can deploy code. The token is the caller's `RAY_AUTH_TOKEN` when set
(containers, where a secret store hands it over), else the file `RAY_AUTH_TOKEN_PATH`
names, else one generated once into `<state dir>/ray/auth_token` (mode 600) and handed to
Ray as `RAY_AUTH_TOKEN_PATH`: Ray then never writes or reads `~/.ray/auth_token`, which a
plain `ray.init()` of anyone on the machine could share.

Everything talks to Ray through its dashboard's REST API (as `serve deploy` and KubeRay
do) with its one client (`gateway.control.serve_admin`), which sends the token too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Set
from pathlib import Path
from typing import Any

import httpx

from gateway.control.declarative import RoutingUpdateError, ingress_replicas, live_routing
from gateway.control.ray_processes import CLUSTER_MARKER_ENV, Stopped, read_record, stop_processes
from gateway.control.serve_admin import ServeAdmin, ServeAdminError
from gateway.control.serve_config import RAY_BACKGROUND_FLAGS, ray_node_env, serve_config
from gateway.domain.config import Config
from gateway.domain.environment import (
    environment,
    private_temp_suffix,
    ray_token_file,
    secret_problems,
)
from gateway.domain.routing_settings import RoutingError, RoutingSettings

# Serve's REST calls: a status read is quick; a deploy or a delete waits for the controller
GET_TIMEOUT_S = 10.0
DEPLOY_TIMEOUT_S = 60.0
# how often `up` looks for the dashboard, then the app: each wait adds up to one poll
START_POLL_S = 0.2


class ClusterError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class ClusterPaths:
    state_dir: Path

    @property
    def temp_dir(self) -> Path:
        # Ray's Unix sockets live under its temp dir and must stay under ~100 characters
        return Path("/tmp") / f"costgate-ray-{private_temp_suffix(self.state_dir)}"

    @property
    def haproxy_dir(self) -> Path:
        # Serve adds a 56-character folder below it, and HAProxy's socket paths stop at 97
        return Path("/tmp") / f"cgh-{self.temp_dir.name.rsplit('-', 1)[-1]}"

    @property
    def record(self) -> Path:
        return self.state_dir / "cluster.json"

    @property
    def token_file(self) -> Path:
        return ray_token_file(self.state_dir)


def dashboard_url(cfg: Config) -> str:
    return environment().ray_dashboard_url(cfg)


def gateway_url(cfg: Config) -> str:
    return environment().gateway_url(cfg)


def start_head(cfg: Config, paths: ClusterPaths, env: dict[str, str]) -> bool:
    """Start a Ray head unless one answers on the dashboard port; True if we started it.

    A head that answers but refuses our token is someone else's (or was started with
    another token): we say so rather than try to start a second one on its ports.
    """
    url = dashboard_url(cfg)
    auth_env = ray_auth_env(paths, env)
    # this process's own calls read the token the way every client does; a token we just
    # generated is in the state dir's file, where Environment.ray_token() looks
    with ServeAdmin(url) as admin:
        status = admin.version_status()
        if status is not None and 200 <= status < 300:
            if admin.authentication_mode() == "disabled":
                # a head from before token auth, or started by hand: it runs whatever
                # anyone who reaches its dashboard sends, so we do not deploy onto it
                raise ClusterError(
                    f"the Ray head at {url} runs without token auth; stop it "
                    "(`costgate down`) and run `costgate up` again"
                )
            return False
        if status in (401, 403):
            raise ClusterError(
                f"a Ray dashboard answers at {url} but refuses our token (HTTP {status}); "
                "stop that cluster, or set RAY_AUTH_TOKEN to its token"
            )
        _ray_start(cfg, paths, {**env, **auth_env}, url)
        deadline = time.monotonic() + 60
        while not admin.is_up():
            if time.monotonic() > deadline:
                raise ClusterError(f"Ray's dashboard did not answer at {url}")
            time.sleep(START_POLL_S)
    return True


def ray_auth_env(paths: ClusterPaths, env: dict[str, str]) -> dict[str, str]:
    """The variables that put `ray start` and every Ray process in token mode, with a token.

    The token is generated at most once per state dir and kept in a file only we can
    read; a file that exists is reused (its mode tightened), so clients keep working
    across `down` and `up`.
    """
    given = env.get("RAY_AUTH_TOKEN", "").strip()
    if given:
        problems = secret_problems({"RAY_AUTH_TOKEN": given}, ["RAY_AUTH_TOKEN"])
        if problems:
            raise ClusterError(problems[0])
        return {"RAY_AUTH_MODE": "token"}
    path = token_location(paths, env)
    _ensure_token_file(Path(path))
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": path}


def token_location(paths: ClusterPaths, env: dict[str, str]) -> str:
    """Where the head's token is, for a message (never the token itself)."""
    if env.get("RAY_AUTH_TOKEN", "").strip():
        return "RAY_AUTH_TOKEN"
    named = env.get("RAY_AUTH_TOKEN_PATH", "").strip()
    return str(Path(named).expanduser() if named else paths.token_file)


def _ensure_token_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        # written whole to a private file, then linked into place: two `up`s at once end
        # up with one token (the link fails for the second), and no one ever reads a
        # half-written or world-readable file
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                # 32 bytes of entropy, as Ray's own generator
                out.write(secrets.token_urlsafe(32) + "\n")
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    path.chmod(0o600)
    if not path.read_text().strip():
        raise ClusterError(f"Ray's token file {path} is empty; delete it to get a new one")


def _ray_start(cfg: Config, paths: ClusterPaths, env: dict[str, str], url: str) -> None:
    r = cfg.gateway.ray
    loopback = environment().ray_node_ip in ("127.0.0.1", "localhost")
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        f"--node-ip-address={environment().ray_node_ip}",
        f"--port={r.head_port}",
        f"--dashboard-host={environment().ray_dashboard_host or r.dashboard_host}",
        f"--dashboard-port={r.dashboard_port}",
        "--include-dashboard=true",
        f"--ray-client-server-port={r.ports()['client_server_port']}",
        f"--dashboard-agent-listen-port={r.ports()['dashboard_agent_port']}",
        f"--metrics-export-port={r.metrics_export_port}",
        f"--temp-dir={paths.temp_dir}",
        # worker ports stay clear of the ranges our tests and servers use
        "--min-worker-port=20000",
        "--max-worker-port=29999",
        "--disable-usage-stats",
        *RAY_BACKGROUND_FLAGS,
    ]
    if r.num_cpus:
        cmd.append(f"--num-cpus={r.num_cpus}")
    env = {
        **env,
        CLUSTER_MARKER_ENV: str(paths.temp_dir),
        # Without this Ray resolves 127.0.0.1 to the host's outward address and binds
        # its services there; other machines join a head on COSTGATE_RAY_NODE_IP
        # (`costgate join`, docs/deploy.md), which then needs Ray's resolution.
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0" if loopback else "1",
        # Ray starts workers at nice 15; the replicas are the request path and must not
        # yield the CPU to a database or a batch job on the same machine
        "RAY_worker_niceness": "0",
    }
    for name, value in ray_node_env(cfg).items():
        env.setdefault(name, value)  # an operator's own setting wins
    if cfg.gateway.ingress == "haproxy":
        env["PYTHONPATH"] = haproxy_site_path(env.get("PYTHONPATH"))
        # HAProxy's files and ports default to machine-wide ones (/tmp/haproxy-serve,
        # 8404, 9101): give them this head's, so that two heads can share a machine
        haproxy = paths.haproxy_dir
        haproxy.mkdir(parents=True, exist_ok=True)
        # Serve makes HAProxy's admin socket mode 666: only this user may reach it
        haproxy.chmod(0o700)
        ports = r.ports()
        first, last = r.replica_ports()
        env.update(
            RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT=str(first),
            RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT=str(last),
            RAY_SERVE_FALLBACK_PROXY_HTTP_PORT=str(ports["fallback_proxy_port"]),
            RAY_SERVE_FALLBACK_PROXY_GRPC_PORT=str(ports["fallback_grpc_port"]),
            RAY_SERVE_HAPROXY_STATS_PORT=str(ports["haproxy_stats_port"]),
            RAY_SERVE_HAPROXY_METRICS_PORT=str(ports["haproxy_metrics_port"]),
            RAY_SERVE_HAPROXY_CONFIG_FILE_LOC=str(haproxy / "haproxy.cfg"),
            RAY_SERVE_HAPROXY_SOCKET_PATH=str(haproxy / "admin.sock"),
            RAY_SERVE_HAPROXY_SERVER_STATE_BASE=str(haproxy),
            RAY_SERVE_HAPROXY_SERVER_STATE_FILE=str(haproxy / "server-state"),
            RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH=str(haproxy / "metrics.sock"),
        )
    # a session of its own, which every process of the head inherits and none leaves:
    # `down` finds them all by it, whatever they renamed themselves to (ray_processes)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    # recorded before `ray start` returns: a start that fails half-way is stopped by `down`
    paths.record.write_text(json.dumps({"temp_dir": str(paths.temp_dir), "dashboard": url,
                                        "started_by_us": True, "session": proc.pid}))
    output, _ = proc.communicate(timeout=180)
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-15:])
        raise ClusterError(f"ray start failed:\n{tail}")


def haproxy_site_path(pythonpath: str | None) -> str:
    """PYTHONPATH with the folder whose sitecustomize binds HAProxy's stats and metrics
    listeners to loopback (`gateway/control/haproxy_site`) first."""
    site = Path(__file__).resolve().parent / "haproxy_site"
    if not (site / "sitecustomize.py").is_file():  # an install without it: never silently open
        raise ClusterError(f"{site}/sitecustomize.py is missing: reinstall costgate")
    return os.pathsep.join([str(site), *([pythonpath] if pythonpath else [])])


def deploy(cfg: Config, *, config_path: Path, state_dir: Path) -> dict[str, Any]:
    """PUT our application, keeping every other application of the cluster as it is."""
    with ServeAdmin(dashboard_url(cfg)) as admin:
        try:
            # the first Serve call of a fresh head wakes the dashboard's Serve module (it
            # connects to Ray first): on a loaded 2-core machine that took more than 10 s
            current = admin.instance(timeout_s=DEPLOY_TIMEOUT_S)
        except ServeAdminError as err:
            raise ClusterError(str(err)) from None
        ours = serve_config(
            cfg, config_path=config_path, state_dir=state_dir, routing=_live_routing(current, cfg)
        )
        running = (current.get("applications") or {}).values()
        others = [
            app["deployed_app_config"]
            for app in running
            if app.get("deployed_app_config") and app.get("name") != cfg.gateway.app_name
        ]
        ours["applications"] = others + ours["applications"]
        try:
            admin.put(ours, timeout_s=DEPLOY_TIMEOUT_S)
        except ServeAdminError as err:
            if err.status_code is None:
                raise ClusterError(str(err)) from None
            # the last lines of a traceback say what went wrong
            raise ClusterError(
                f"deploy refused by Ray ({err.status_code}): {err.body[-1500:]}"
            ) from None
    return ours


def _live_routing(instance: dict[str, Any], cfg: Config) -> RoutingSettings | None:
    """The weights ops set live, if the app runs: a redeploy must not revert them."""
    if cfg.gateway.app_name not in (instance.get("applications") or {}):
        return None
    try:
        return live_routing(instance, cfg.gateway.app_name, cfg).settings
    except (RoutingUpdateError, RoutingError, KeyError, ValueError):
        return None  # not ours, or no longer valid under this config: the config's weights


def wait_ready(cfg: Config, timeout_s: float = 180.0, replacing: Set[str] = frozenset()) -> float:
    """Wait until the app is RUNNING, or (a redeploy) as many replicas not in `replacing`
    run as it aims at, and /readyz answers; return the seconds it took. Serve says
    DEPLOYING until the replaced ones have drained (30 s by default), sent nothing new."""
    started = time.monotonic()
    name = cfg.gateway.app_name
    status = "unknown"
    message = ""
    with ServeAdmin(dashboard_url(cfg)) as admin:
        while time.monotonic() - started < timeout_s:
            try:
                apps = admin.instance(timeout_s=GET_TIMEOUT_S).get("applications") or {}
                app = apps.get(name) or {}
                status = app.get("status", "missing")
                message = app.get("message", "")
                if status == "DEPLOY_FAILED":
                    raise ClusterError(f"the gateway failed to deploy: {message[-2000:]}")
                replicas, target = ingress_replicas({"applications": apps}, name)
                new = [r for r, state in replicas.items()
                       if state == "RUNNING" and r not in replacing]  # fmt: skip
                if status == "RUNNING" or (replacing and target and len(new) >= target):
                    ready = httpx.get(f"{gateway_url(cfg)}/readyz", timeout=5)
                    if ready.status_code == 200:
                        return time.monotonic() - started
            except (ServeAdminError, httpx.HTTPError):
                pass
            time.sleep(START_POLL_S)
    raise ClusterError(f"the gateway was not ready after {timeout_s:.0f} s ({status}): {message}")


def drain_timeout_s(cfg: Config) -> float:
    """How long `down` waits for the replicas: as long as Serve lets each one finish (its
    drain and its ledger's last flush fit in graceful_shutdown_timeout_s), and a margin.
    Stopping the head sooner kills replicas that still hold answered requests' rows."""
    return cfg.gateway.graceful_shutdown_timeout_s + 30.0


def shutdown_serve(
    cfg: Config, timeout_s: float | None = None, progress: Callable[[str], None] | None = None
) -> bool:
    """Delete every Serve application and wait: replicas drain and flush on the way out.

    True once no application is left (or Serve is not running); False when `timeout_s`
    (by default `drain_timeout_s`) ran out first.
    """
    timeout_s = drain_timeout_s(cfg) if timeout_s is None else timeout_s
    with ServeAdmin(dashboard_url(cfg)) as admin:
        if not admin.is_up():
            return True
        # a refused DELETE leaves the apps running: the wait below then runs out
        with contextlib.suppress(ServeAdminError):
            admin.delete_applications(timeout_s=DEPLOY_TIMEOUT_S)
        started = time.monotonic()
        told = started
        while time.monotonic() - started < timeout_s:
            try:
                apps = admin.instance(timeout_s=GET_TIMEOUT_S).get("applications") or {}
            except ServeAdminError as err:
                if err.refused:
                    return True  # the head is gone, and its replicas with it
                if err.status_code in (401, 403):
                    return False  # no longer ours to watch
                # busy, not gone: Ray's DELETE handler blocks the dashboard's event loop
                # while Serve shuts down, and a 5xx may come from a controller on its way
                # out. Stopping the head now would kill replicas still flushing their rows
                time.sleep(0.5)
                continue
            if not apps:
                return True
            if progress is not None and time.monotonic() - told >= 10:
                told = time.monotonic()
                progress(f"waiting for {', '.join(sorted(apps))} to drain and flush "
                         f"({told - started:.0f} s of at most {timeout_s:.0f} s)")  # fmt: skip
            time.sleep(0.5)
    return False


# With Serve's applications gone (drained and flushed), nothing of ours runs on the head,
# and GCS, the raylet, the autoscaler's monitor and Ray's runtime-env agent do not act on
# SIGTERM: they were still running 10 s after it on these machines, every time, and a
# `costgate down` sat out the whole grace before its SIGKILL. A short grace then.
DRAINED_HEAD_GRACE_S = 2.0
HEAD_GRACE_S = 10.0


def stop_head(paths: ClusterPaths, grace_s: float = HEAD_GRACE_S) -> Stopped:
    """Stop the Ray processes of our head only, and return once they are gone (or say
    which pids remain: the record is then kept, so that another `down` finds them)."""
    stopped = stop_processes(paths.temp_dir, grace_s, session=head_session(paths))
    if not stopped.remaining:
        paths.record.unlink(missing_ok=True)
        shutil.rmtree(paths.haproxy_dir, ignore_errors=True)
    return stopped


def head_session(paths: ClusterPaths) -> int | None:
    """The session id of the head `up` started (None: not recorded, an older record)."""
    session = read_record(paths.record).get("session")
    return session if isinstance(session, int) else None


def started_by_us(paths: ClusterPaths) -> bool:
    return bool(read_record(paths.record).get("started_by_us"))

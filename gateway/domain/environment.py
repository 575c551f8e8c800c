"""The process environment, read in one place: every setting costgate takes from it.

One pydantic-settings class names each variable once. Secrets (`DATABASE_URL`, dashboard
users, Ray's token) are `SecretStr`, so a settings object printed in a log or an error
shows `**********`. It is read afresh on each call of `environment()`: the commands and
the replicas call it at start, never per request, and tests change the variables
between calls. The URLs a client uses to reach the gateway and the Ray dashboard are
derived here too, with the one mapping from a bind address (0.0.0.0, ::) to an address
a client can dial.

Provider keys and static gateway keys are named by the YAML config (`api_key_env`,
`static_key_envs`), so they are read by name through `secret_from_env`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


# What the URLs are derived from: the config's `gateway:` section (Config fits these
# structurally; config.py imports this module for its defaults, so not the other way).
class _RayAddress(Protocol):
    @property
    def dashboard_host(self) -> str: ...
    @property
    def dashboard_port(self) -> int: ...


class _GatewayAddress(Protocol):
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def ray(self) -> _RayAddress: ...


class Configured(Protocol):
    @property
    def gateway(self) -> _GatewayAddress: ...

# the checkout (or the installed tree's parent): default config and state dir live here
PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIG = PROJECT_ROOT / "config" / "costgate.example.yaml"
DEFAULT_STATE_DIR = PROJECT_ROOT / ".state"
ADMIN_KEY_FILE = "admin_key"

# Ray's token for the head `costgate up` starts, relative to the state dir; Ray's own
# default (what a plain `ray.init()` writes) is the last place a client looks
RAY_TOKEN_FILE = Path("ray") / "auth_token"
RAY_DEFAULT_TOKEN_FILE = Path.home() / ".ray" / "auth_token"

# addresses a server binds to that a client cannot dial
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


class Environment(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    # the ledger; unset means the embedded PostgreSQL under the state dir
    database_url: SecretStr | None = Field(default=None, validation_alias="DATABASE_URL")
    # optional: a streaming replica of it, for reads of the ledger only (the dashboard,
    # the usage API, reports and exports); the writer, budgets and keys use the primary
    database_read_url: SecretStr | None = Field(default=None, validation_alias="DATABASE_READ_URL")
    config_path: Path | None = Field(default=None, validation_alias="COSTGATE_CONFIG")
    state_dir_override: Path | None = Field(default=None, validation_alias="COSTGATE_STATE_DIR")
    # dashboard sign-ins: `name:role:hash,...` and/or a file of such lines
    dashboard_users: SecretStr | None = Field(
        default=None, validation_alias="COSTGATE_DASHBOARD_USERS"
    )
    dashboard_users_file: Path | None = Field(
        default=None, validation_alias="COSTGATE_DASHBOARD_USERS_FILE"
    )
    dashboard_refresh_s: int = Field(
        default=30, gt=0, validation_alias="COSTGATE_DASHBOARD_REFRESH_S"
    )
    # signs the dashboard's session cookies; unset, a random one kept (mode 600) under
    # the state dir. Dashboard replicas that share sign-ins need the same one.
    dashboard_secret: SecretStr | None = Field(
        default=None, validation_alias="COSTGATE_DASHBOARD_SECRET"
    )
    # how long a dashboard sign-in lasts (the cookie's and the server session's expiry)
    dashboard_session_hours: float = Field(
        default=12, gt=0, le=24 * 30, validation_alias="COSTGATE_DASHBOARD_SESSION_HOURS"
    )
    # proxies (addresses or CIDRs, comma-separated) whose X-Forwarded-For the dashboard's
    # sign-in throttle believes; unset, the connection's own address counts
    dashboard_trusted_proxies: str = Field(
        default="", validation_alias="COSTGATE_DASHBOARD_TRUSTED_PROXIES"
    )
    # overrides for a dashboard that runs apart from the gateway (containers, k8s)
    gateway_url_override: str | None = Field(default=None, validation_alias="COSTGATE_GATEWAY_URL")
    ray_dashboard_url_override: str | None = Field(
        default=None, validation_alias="COSTGATE_RAY_DASHBOARD_URL"
    )
    ray_dashboard_host: str | None = Field(
        default=None, validation_alias="COSTGATE_RAY_DASHBOARD_HOST"
    )
    # the address `costgate up` starts Ray's head on: loopback keeps a one-machine cluster
    # off the network; one that other machines reach lets them `costgate join`
    ray_node_ip: str = Field(default="127.0.0.1", validation_alias="COSTGATE_RAY_NODE_IP")
    app_name: str | None = Field(default=None, validation_alias="COSTGATE_APP_NAME")
    metrics_app_label: bool = Field(default=True, validation_alias="COSTGATE_METRICS_APP_LABEL")
    # where `costgate alerts run` posts budget threshold webhooks (Slack's URL holds its
    # token: a secret, never logged)
    alert_webhook_url: SecretStr | None = Field(
        default=None, validation_alias="COSTGATE_ALERT_WEBHOOK_URL"
    )
    # the key `costgate bench` and the demo traffic send
    api_key: SecretStr | None = Field(default=None, validation_alias="COSTGATE_API_KEY")
    # the admin key the control plane sends to the replicas' `/costgate/routing` while it
    # confirms a routing change; unset, the one `costgate up` keeps under the state dir
    admin_key: SecretStr | None = Field(default=None, validation_alias="COSTGATE_ADMIN_KEY")
    # Ray's token auth: the token itself, or a file that holds it (Ray reads both names)
    ray_auth_token: SecretStr | None = Field(default=None, validation_alias="RAY_AUTH_TOKEN")
    ray_auth_token_path: Path | None = Field(default=None, validation_alias="RAY_AUTH_TOKEN_PATH")

    @property
    def database_url_value(self) -> str | None:
        return self.database_url.get_secret_value() if self.database_url else None

    @property
    def database_read_url_value(self) -> str | None:
        return self.database_read_url.get_secret_value() if self.database_read_url else None

    @property
    def config_file(self) -> Path:
        return self.config_path or EXAMPLE_CONFIG

    @property
    def state_dir(self) -> Path:
        if self.state_dir_override:
            return self.state_dir_override.expanduser().resolve()
        return DEFAULT_STATE_DIR

    @property
    def admin_key_file(self) -> Path:
        """Where `costgate up` keeps the control plane's admin key (mode 600)."""
        return self.state_dir / ADMIN_KEY_FILE

    def control_admin_key(self) -> str | None:
        """The admin key for the control plane's calls: the variable, else the state file."""
        if self.admin_key is not None and self.admin_key.get_secret_value().strip():
            return self.admin_key.get_secret_value().strip()
        try:
            return self.admin_key_file.read_text().strip() or None
        except OSError:
            return None

    @property
    def ray_token_file(self) -> Path:
        """Where `costgate up` keeps the token of the Ray head it starts (mode 600)."""
        return ray_token_file(self.state_dir)

    def ray_token(self) -> str | None:
        """The token Ray's dashboard wants, looked up in this order:

        `RAY_AUTH_TOKEN`; else the file `RAY_AUTH_TOKEN_PATH` names (and only that one, as
        Ray does: a client pointed at a file must not fall back to another cluster's
        token); else the state dir's token file, the one `costgate up` started Ray with;
        else Ray's default `~/.ray/auth_token`, for a cluster started some other way.
        """
        if self.ray_auth_token is not None and self.ray_auth_token.get_secret_value().strip():
            return self.ray_auth_token.get_secret_value().strip()
        if self.ray_auth_token_path is not None:
            return _read_token(self.ray_auth_token_path.expanduser())
        return _read_token(self.ray_token_file) or _read_token(RAY_DEFAULT_TOKEN_FILE)

    def gateway_url(self, cfg: Configured) -> str:
        """Where a client on this machine reaches the gateway (no trailing slash)."""
        if self.gateway_url_override:
            return self.gateway_url_override.rstrip("/")
        return _http_url(cfg.gateway.host, cfg.gateway.port)

    def ray_dashboard_url(self, cfg: Configured) -> str:
        """Where a client on this machine reaches Ray's dashboard and Serve's REST API."""
        if self.ray_dashboard_url_override:
            return self.ray_dashboard_url_override.rstrip("/")
        ray = cfg.gateway.ray
        return _http_url(self.ray_dashboard_host or ray.dashboard_host, ray.dashboard_port)


def environment() -> Environment:
    return Environment()


def ray_token_file(state_dir: Path) -> Path:
    """The Ray token file under a state dir: `costgate up` writes it, every client reads it."""
    return state_dir / RAY_TOKEN_FILE


TEMP_SUFFIX_FILE = "ray-temp-suffix"


def private_temp_suffix(state_dir: Path) -> str:
    """The random part of the folders this state dir's Ray head keeps in /tmp (Ray's temp
    dir, HAProxy's files): made once, kept in the state dir (mode 600), so that nobody
    else on the machine can predict them and lay a folder or a link there first. /tmp
    because Ray's and HAProxy's socket paths must stay under ~100 characters. A head
    started before this kept the state dir's digest: one that still runs keeps it."""
    path = state_dir / TEMP_SUFFIX_FILE
    known = _read_token(path)
    if known is not None and known.isalnum():
        return known
    old = hashlib.sha1(str(state_dir.resolve()).encode()).hexdigest()[:10]
    suffix = old if Path(f"/tmp/costgate-ray-{old}").exists() else secrets.token_hex(5)
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: theirs counts
        return private_temp_suffix(state_dir)
    with os.fdopen(fd, "w") as out:
        out.write(suffix)
    return suffix


def _read_token(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def client_host(bind_host: str) -> str:
    """The address a client dials for a server bound to `bind_host`."""
    return _WILDCARDS.get(bind_host, bind_host)


def _http_url(bind_host: str, port: int) -> str:
    host = client_host(bind_host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


# what example.env and deploy/k8s/secret.example.yaml hold until someone fills them in
_PLACEHOLDER_MARKERS = ("change-me", "changeme", "replace-with", "replace-me")
# Ray's own generator makes 64 hex characters; anything much shorter is a password
RAY_TOKEN_MIN_CHARS = 32


def secret_problems(environ: Mapping[str, str], names: Iterable[str]) -> list[str]:
    """What is wrong with each named secret (unset, empty, an example placeholder, a Ray
    token too short to be random), one line per variable; empty when all is well.

    The lines name the variable and what it looks like, never its value: they go to
    logs and terminals.
    """
    problems = []
    for name in names:
        value = environ.get(name, "").strip()
        lowered = value.lower()
        if not value:
            problems.append(f"{name} is not set")
        elif any(marker in lowered for marker in _PLACEHOLDER_MARKERS):
            problems.append(f"{name} still holds the example's placeholder: set a real value")
        elif name == "RAY_AUTH_TOKEN" and len(value) < RAY_TOKEN_MIN_CHARS:
            problems.append(
                f"{name} is shorter than {RAY_TOKEN_MIN_CHARS} characters: use a random one, "
                'e.g. python -c "import secrets; print(secrets.token_hex(32))"'
            )
    return problems


def secret_from_env(name: str) -> str | None:
    """A secret the config names by its variable (provider keys, static gateway keys)."""
    return os.environ.get(name) or None


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach a server bound to `host`."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere

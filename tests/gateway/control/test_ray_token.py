"""Ray's token: where `costgate up` gets or makes it, and where every client finds it.

`ray_auth_env` is what `start_head` puts in the environment of `ray start` (and so of
every Ray process); `Environment.ray_token()` is what ServeAdmin sends. The live side
(401 without it, 200 with it, on a head from `costgate up`) is in test_live_update.py.
"""

from __future__ import annotations

import http.server
import json
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.control.cluster import ClusterError, ClusterPaths, ray_auth_env, start_head
from gateway.domain.config import default_config_path, load_config
from gateway.domain.environment import Environment, environment

TOKEN_VARS = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in TOKEN_VARS:
        monkeypatch.delenv(name, raising=False)
    state = tmp_path / "state"
    monkeypatch.setenv("COSTGATE_STATE_DIR", str(state))
    # Ray's default file, in a home of our own: the real one may hold any token
    monkeypatch.setattr(
        "gateway.domain.environment.RAY_DEFAULT_TOKEN_FILE", tmp_path / "home-ray-token"
    )
    return state


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_up_generates_a_private_token_once_and_hands_ray_its_path(clean_env: Path) -> None:
    paths = ClusterPaths(clean_env)
    env = ray_auth_env(paths, {})
    token_file = clean_env / "ray" / "auth_token"
    assert env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file)}
    assert (mode(token_file), mode(token_file.parent)) == (0o600, 0o700)
    token = token_file.read_text().strip()
    assert len(token) >= 40
    # the next `up` keeps it (clients that read it keep working), and tightens its mode
    token_file.chmod(0o644)
    assert ray_auth_env(paths, {}) == env
    assert token_file.read_text().strip() == token and mode(token_file) == 0o600
    # a client of this state dir finds it, with nothing else set
    assert environment().ray_token() == token
    # and another state dir gets another token
    other = ClusterPaths(clean_env.parent / "other")
    ray_auth_env(other, {})
    assert other.token_file.read_text().strip() != token


def test_a_token_given_by_the_caller_is_used_as_it_is(clean_env: Path) -> None:
    given = "k" * 48
    assert ray_auth_env(ClusterPaths(clean_env), {"RAY_AUTH_TOKEN": given}) == {
        "RAY_AUTH_MODE": "token"
    }
    assert not (clean_env / "ray" / "auth_token").exists()
    named = clean_env.parent / "elsewhere" / "token"
    env = ray_auth_env(ClusterPaths(clean_env), {"RAY_AUTH_TOKEN_PATH": str(named)})
    assert env["RAY_AUTH_TOKEN_PATH"] == str(named) and mode(named) == 0o600


@pytest.mark.parametrize("token", ["change-me-to-a-long-random-string", "q7Zx19"])
def test_a_placeholder_or_short_token_stops_up_without_showing_it(
    clean_env: Path, token: str
) -> None:
    with pytest.raises(ClusterError) as err:
        ray_auth_env(ClusterPaths(clean_env), {"RAY_AUTH_TOKEN": token})
    assert "RAY_AUTH_TOKEN" in str(err.value) and token not in str(err.value)


def test_an_empty_token_file_is_an_error_not_an_open_cluster(clean_env: Path) -> None:
    token_file = clean_env / "ray" / "auth_token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text("\n")
    with pytest.raises(ClusterError, match="empty"):
        ray_auth_env(ClusterPaths(clean_env), {})


def test_clients_look_for_the_token_in_rays_order_then_ours(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home-ray-token"
    home.write_text("from-home\n")
    assert Environment().ray_token() == "from-home"  # nothing else: Ray's default file
    ray_auth_env(ClusterPaths(clean_env), {})
    state_token = (clean_env / "ray" / "auth_token").read_text().strip()
    assert Environment().ray_token() == state_token  # `up`'s file before Ray's default
    named = tmp_path / "named"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    # a named file that does not exist is no token, not a fall back to another cluster's
    assert Environment().ray_token() is None
    named.write_text("from-path\n")
    assert Environment().ray_token() == "from-path"
    monkeypatch.setenv("RAY_AUTH_TOKEN", " from-variable ")
    assert Environment().ray_token() == "from-variable"
    # the settings object never shows it
    assert "from-variable" not in repr(Environment())


class _Dashboard(http.server.BaseHTTPRequestHandler):
    """A stand-in for a Ray dashboard already on the port: its version and auth answers."""

    version_status = 200
    auth_mode = "token"

    def do_GET(self) -> None:  # noqa: N802 - the handler's API
        if self.path == "/api/authentication_mode":
            status, body = 200, json.dumps({"authentication_mode": self.auth_mode})
        else:
            status, body = self.version_status, "{}"
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def running_dashboard(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    handler = type("Handler", (_Dashboard,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("COSTGATE_RAY_DASHBOARD_URL", f"http://127.0.0.1:{server.server_port}")
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("version_status", "auth_mode", "refusal"),
    [(403, "token", "refuses our token"), (200, "disabled", "without token auth")],
)
def test_up_does_not_reuse_a_head_it_cannot_trust(
    running_dashboard: type, clean_env: Path, version_status: int, auth_mode: str, refusal: str
) -> None:
    running_dashboard.version_status, running_dashboard.auth_mode = version_status, auth_mode
    cfg = load_config(default_config_path())
    with pytest.raises(ClusterError, match=refusal):
        start_head(cfg, ClusterPaths(clean_env), {})
    assert not ClusterPaths(clean_env).record.exists()  # and it started nothing


def test_up_reuses_a_head_that_takes_our_token(running_dashboard: type, clean_env: Path) -> None:
    cfg = load_config(default_config_path())
    assert start_head(cfg, ClusterPaths(clean_env), {}) is False

"""The one client of Serve's REST API on the Ray dashboard (`/api/serve/applications/`).

`costgate up|down` (deploy, wait, shut down) and the live routing update make the same
calls `serve deploy` and KubeRay make, so they share this client: one place that knows
the paths, sends Ray's auth token (`Authorization: Bearer`, from the environment, read
again on every request since `ray start` may write it after the client was made), and
turns a failed call into a `ServeAdminError` that says what was being done and never
carries the token. Callers word the error for their own command.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator
from typing import Any

import httpx

from gateway.domain.environment import environment

APPLICATIONS_PATH = "/api/serve/applications/"
VERSION_PATH = "/api/version"
AUTH_MODE_PATH = "/api/authentication_mode"
# Ray's state API: every node the GCS knows, dead ones included (until it forgets them)
NODES_PATH = "/api/v0/nodes"
_REDACTED = "[token]"


class ServeAdminError(RuntimeError):
    """A call to Serve's REST API failed; `status_code` is None when no answer came.

    `body` is the answer's text (token-free), for callers that show more of it;
    `refused` says that nothing listens on the dashboard's address (the head is gone), as
    opposed to a dashboard that is busy, slow or failing.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, body: str = "",
        refused: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.refused = refused


class _FromEnvironment(enum.Enum):
    TOKEN = "the token from the environment"


FROM_ENVIRONMENT = _FromEnvironment.TOKEN


class _BearerToken(httpx.Auth):
    """`Authorization: Bearer <token>` on every request when there is a token."""

    def __init__(self, token: Callable[[], str | None]) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._token()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


class ServeAdmin:
    """Serve's REST API at one Ray dashboard: up check, GET, PUT and DELETE of the apps.

    `token` defaults to Ray's token as the environment gives it (`RAY_AUTH_TOKEN`, else
    `RAY_AUTH_TOKEN_PATH`, else the state dir's token file, else `~/.ray/auth_token`: see
    `Environment.ray_token()`); None sends no token. `timeout_s` applies to every call that does
    not pass its own.
    """

    def __init__(
        self,
        dashboard_url: str,
        *,
        token: str | None | _FromEnvironment = FROM_ENVIRONMENT,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self._fixed_token = token
        self._client = httpx.Client(
            base_url=dashboard_url.rstrip("/"),
            auth=_BearerToken(self._token),
            transport=transport,
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ServeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_up(self, *, timeout_s: float = 2.0) -> bool:
        """Whether the dashboard answers `GET /api/version` with a success."""
        status = self.version_status(timeout_s=timeout_s)
        return status is not None and 200 <= status < 300

    def version_status(self, *, timeout_s: float = 2.0) -> int | None:
        """The HTTP status of `GET /api/version` (401/403: up, but not for our token), or
        None when nothing answers."""
        try:
            return self._client.get(VERSION_PATH, timeout=timeout_s).status_code
        except httpx.HTTPError:
            return None

    def authentication_mode(self, *, timeout_s: float = 2.0) -> str | None:
        """What the dashboard says of its token auth (`token`, `disabled`), or None when it
        does not say (Ray before 2.52, or no answer). This path needs no token."""
        try:
            resp = self._client.get(AUTH_MODE_PATH, timeout=timeout_s)
            mode = resp.json().get("authentication_mode") if resp.is_success else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return mode if isinstance(mode, str) else None

    def instance(self, *, timeout_s: float | None = None) -> dict[str, Any]:
        """Every Serve application with its status and declarative config, as Serve has them."""
        resp = self._send(
            "GET",
            APPLICATIONS_PATH,
            timeout_s,
            doing="reading the Serve applications",
            unreachable=f"cannot reach the Ray dashboard at {self._client.base_url}",
        )
        try:
            body = resp.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ServeAdminError(
                f"reading the Serve applications: the Ray dashboard at {self._client.base_url} "
                "answered with something other than a JSON object",
                status_code=resp.status_code,
                body=self._redact(resp.text),
            )
        return body

    def nodes(self, *, timeout_s: float | None = None) -> list[dict[str, Any]]:
        """The cluster's nodes as Ray's state API lists them (`node_id`, `node_ip`,
        `state`: ALIVE or DEAD, `is_head_node`, ...)."""
        resp = self._send(
            "GET",
            f"{NODES_PATH}?limit=1000&detail=true",
            timeout_s,
            doing="listing the Ray nodes",
            unreachable=f"cannot reach the Ray dashboard at {self._client.base_url}",
        )
        try:
            rows = resp.json()["data"]["result"]["result"]
        except (ValueError, KeyError, TypeError):
            raise ServeAdminError(
                "listing the Ray nodes: the Ray dashboard answered in an unknown shape",
                status_code=resp.status_code,
                body=self._redact(resp.text[:500]),
            ) from None
        return [row for row in rows if isinstance(row, dict)]

    def put(self, config: dict[str, Any], *, timeout_s: float | None = None) -> None:
        """Deploy `config` declaratively; it replaces the whole config (left out = deleted)."""
        self._send(
            "PUT",
            APPLICATIONS_PATH,
            timeout_s,
            json=config,
            doing="sending the new Serve config",
            unreachable="sending the new Serve config failed",
        )

    def delete_applications(self, *, timeout_s: float | None = None) -> None:
        """Delete every Serve application: the replicas drain and shut down gracefully."""
        self._send(
            "DELETE",
            APPLICATIONS_PATH,
            timeout_s,
            doing="deleting the Serve applications",
            unreachable=f"cannot reach the Ray dashboard at {self._client.base_url}",
        )

    def _token(self) -> str | None:
        if isinstance(self._fixed_token, _FromEnvironment):
            return environment().ray_token()
        return self._fixed_token

    def _redact(self, text: str) -> str:
        token = self._token()
        return text.replace(token, _REDACTED) if token else text

    def _send(
        self,
        method: str,
        path: str,
        timeout_s: float | None,
        *,
        doing: str,
        unreachable: str,
        json: dict[str, Any] | None = None,
    ) -> httpx.Response:
        timeout = httpx.USE_CLIENT_DEFAULT if timeout_s is None else timeout_s
        try:
            resp = self._client.request(method, path, json=json, timeout=timeout)
        except httpx.HTTPError as err:
            raise ServeAdminError(
                self._redact(f"{unreachable}: {err}"), refused=isinstance(err, httpx.ConnectError)
            ) from None
        if resp.status_code in (401, 403):
            raise ServeAdminError(
                f"{doing}: the Ray dashboard refused our credentials (HTTP {resp.status_code}); "
                "set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's token, or "
                "COSTGATE_STATE_DIR to the state dir of the `costgate up` that started it",
                status_code=resp.status_code,
                body=self._redact(resp.text),
            )
        if not resp.is_success:
            body = self._redact(resp.text)
            raise ServeAdminError(
                f"{doing}: HTTP {resp.status_code}: {body[:500]}",
                status_code=resp.status_code,
                body=body,
            )
        return resp

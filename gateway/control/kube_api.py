"""The one client of the Kubernetes API: GET and JSON-patch a KubeRay RayService.

Two calls are all the routing update needs, so this is plain httpx against the API
server rather than the `kubernetes` package (a large dependency for two requests). It
finds the server and credentials the way kubectl does (`gateway.domain.routing_target`
says the order), sends `Authorization: Bearer` with a token read from its file on every
request (a pod's projected service-account token is rotated under us), verifies the
server against the cluster's CA, and turns a failed call into `KubeApiError`, whose
message says what was being done and never carries a credential.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import ssl
import tempfile
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateway.control.declarative import RoutingUpdateError
from gateway.domain.routing_target import SERVICE_ACCOUNT_DIR, KubeRayTarget

RAYSERVICE_PATH = "/apis/ray.io/v1/namespaces/{namespace}/rayservices/{name}"
JSON_PATCH = "application/json-patch+json"


class KubeApiError(RoutingUpdateError):
    """A call to the Kubernetes API failed; `status_code` is None when no answer came."""

    def __init__(self, message: str, *, status_code: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


@dataclasses.dataclass(frozen=True)
class KubeCredentials:
    server: str
    namespace: str
    token: str | None = None  # a literal token from a kubeconfig
    token_file: Path | None = None  # read again on every request
    verify: ssl.SSLContext | bool = True

    def bearer(self) -> str | None:
        if self.token_file is not None:
            try:
                return self.token_file.read_text().strip() or None
            except OSError as err:
                raise KubeApiError(
                    f"cannot read the Kubernetes token {self.token_file}: {err.strerror}"
                ) from None
        return self.token


def credentials(target: KubeRayTarget, environ: Mapping[str, str] | None = None) -> KubeCredentials:
    """Where the API server is and how to prove who we are, in kubectl's order."""
    env = os.environ if environ is None else environ
    if target.api_server:
        return KubeCredentials(
            server=target.api_server.rstrip("/"),
            namespace=target.namespace or _pod_namespace() or "default",
            token_file=target.token_file if target.token_file.exists() else None,
            verify=_ca_context(target.ca_file) if target.ca_file.exists() else True,
        )
    if target.kubeconfig is None and env.get("KUBERNETES_SERVICE_HOST"):
        host = env["KUBERNETES_SERVICE_HOST"]
        host = f"[{host}]" if ":" in host else host
        port = env.get("KUBERNETES_SERVICE_PORT", "443")
        return KubeCredentials(
            server=f"https://{host}:{port}",
            namespace=target.namespace or _pod_namespace() or "default",
            token_file=target.token_file,
            verify=_ca_context(target.ca_file),
        )
    path = target.kubeconfig or Path(
        (env.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)[0]
    )
    return from_kubeconfig(path.expanduser(), target.context, target.namespace)


def from_kubeconfig(path: Path, context: str | None, namespace: str | None) -> KubeCredentials:
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except OSError as err:
        raise KubeApiError(f"cannot read kubeconfig {path}: {err.strerror}") from None
    except yaml.YAMLError:
        raise KubeApiError(f"kubeconfig {path} is not valid YAML") from None
    name = context or doc.get("current-context")
    ctx = _named(doc, "contexts", name, path).get("context") or {}
    cluster = _named(doc, "clusters", ctx.get("cluster"), path).get("cluster") or {}
    user = _named(doc, "users", ctx.get("user"), path).get("user") or {}
    if not cluster.get("server"):
        raise KubeApiError(f"kubeconfig {path}: context {name!r} has no cluster server")
    base = path.parent
    verify: ssl.SSLContext | bool = not cluster.get("insecure-skip-tls-verify", False)
    if verify:
        ca = _pem(cluster, "certificate-authority", base)
        verify = ssl.create_default_context(cadata=ca) if ca else True
    cert, key = _pem(user, "client-certificate", base), _pem(user, "client-key", base)
    if cert and key:
        if not isinstance(verify, ssl.SSLContext):
            verify = ssl.create_default_context()
        _load_client_cert(verify, cert, key)
    token_file = user.get("tokenFile")
    return KubeCredentials(
        server=str(cluster["server"]).rstrip("/"),
        namespace=namespace or ctx.get("namespace") or "default",
        token=user.get("token"),
        token_file=(base / token_file) if token_file else None,
        verify=verify,
    )


def _named(doc: Mapping[str, Any], section: str, name: Any, path: Path) -> dict[str, Any]:
    for entry in doc.get(section) or []:
        if entry.get("name") == name:
            return dict(entry)
    raise KubeApiError(f"kubeconfig {path}: no {section[:-1]} named {name!r}")


def _pem(entry: Mapping[str, Any], key: str, base: Path) -> str | None:
    """A kubeconfig's `key-data` (base64) or `key` (a file path, relative to the file)."""
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"]).decode()
    if entry.get(key):
        return (base / str(entry[key])).read_text()
    return None


def _load_client_cert(context: ssl.SSLContext, cert: str, key: str) -> None:
    # ssl loads a client certificate from files only: a private directory, gone at once
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        for p, text in ((cert_path, cert), (key_path, key)):
            p.touch(mode=0o600)
            p.write_text(text)
        context.load_cert_chain(cert_path, key_path)


def _ca_context(ca_file: Path) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except OSError as err:
        raise KubeApiError(f"cannot read the cluster's CA {ca_file}: {err.strerror}") from None


def _pod_namespace() -> str | None:
    with contextlib.suppress(OSError):
        return (SERVICE_ACCOUNT_DIR / "namespace").read_text().strip() or None
    return None


class _Bearer(httpx.Auth):
    def __init__(self, creds: KubeCredentials) -> None:
        self._creds = creds

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._creds.bearer()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


class KubeApi:
    """GET and JSON-patch one namespace's RayServices."""

    def __init__(
        self,
        creds: KubeCredentials,
        *,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.creds = creds
        self._client = httpx.Client(
            base_url=creds.server,
            auth=_Bearer(creds),
            verify=creds.verify,
            timeout=timeout_s,
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def rayservice_path(self, name: str) -> str:
        return RAYSERVICE_PATH.format(namespace=self.creds.namespace, name=name)

    def get_rayservice(self, name: str) -> dict[str, Any]:
        return self._send("GET", name, doing=f"reading RayService {self._where(name)}")

    def patch_rayservice(self, name: str, patch: list[dict[str, Any]]) -> dict[str, Any]:
        """Apply an RFC 6902 patch; its `test` ops make it all-or-nothing."""
        return self._send(
            "PATCH",
            name,
            doing=f"patching RayService {self._where(name)}",
            content=json.dumps(patch).encode(),
            headers={"content-type": JSON_PATCH},
        )

    def _where(self, name: str) -> str:
        return f"{self.creds.namespace}/{name} at {self.creds.server}"

    def _send(
        self,
        method: str,
        name: str,
        *,
        doing: str,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        try:
            resp = self._client.request(
                method, self.rayservice_path(name), content=content, headers=headers
            )
        except httpx.TimeoutException:
            raise KubeApiError(f"{doing}: no answer in time") from None
        except httpx.HTTPError as err:
            # httpx names the URL in its errors, never a header: no token in this message
            raise KubeApiError(f"{doing}: {type(err).__name__}: {err}") from None
        body = resp.text
        if resp.status_code in (401, 403):
            raise KubeApiError(
                f"{doing}: the API server refused our credentials (HTTP {resp.status_code}: "
                f"{_reason(resp)}); the service account (or kubeconfig user) needs get and "
                "patch on rayservices.ray.io in this namespace",
                status_code=resp.status_code,
                body=body,
            )
        if not resp.is_success:
            raise KubeApiError(
                f"{doing}: HTTP {resp.status_code}: {_reason(resp)}",
                status_code=resp.status_code,
                body=body,
            )
        try:
            obj = resp.json()
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise KubeApiError(f"{doing}: the answer is not a JSON object", body=body)
        return obj


def _reason(resp: httpx.Response) -> str:
    """The message of a Kubernetes `Status` answer, else the start of the body."""
    with contextlib.suppress(ValueError, AttributeError):
        message = resp.json().get("message")
        if isinstance(message, str):
            return message[:500]
    return resp.text[:500]


@contextlib.contextmanager
def kube_api(target: KubeRayTarget) -> Iterator[KubeApi]:
    api = KubeApi(credentials(target), timeout_s=target.request_timeout_s)
    try:
        yield api
    finally:
        api.close()

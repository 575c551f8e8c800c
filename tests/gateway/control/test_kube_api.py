"""How the KubeRay target finds the Kubernetes API and proves who it is: in a pod (the
service account's token and CA), from a kubeconfig, or from the config's own URL; and
the environment's override of the target.

Over HTTPS against the fake API server of tests/fixtures/kube_api_server.py with a
certificate made by openssl: the client verifies the server against the cluster's CA
as it would in a cluster, and refuses a server its CA did not sign.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gateway.control.declarative import RolloutFailed, rayservice_rollout_state
from gateway.control.kube_api import KubeApi, KubeApiError, credentials
from gateway.domain.config import default_config_path, load_config
from gateway.domain.routing_target import KubeRayTarget, RoutingTarget, effective_target
from tests.fixtures.kube_api_server import FakeKubeApi, self_signed_certificate
from tests.gateway.control.test_kuberay_routing import NAMESPACE, TOKEN, manifest

CFG = load_config(default_config_path())


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def tls_api(ca) -> Iterator[FakeKubeApi]:
    fake = FakeKubeApi({TOKEN}, tls=ca).start()
    fake.put(manifest(CFG))
    yield fake
    fake.stop()


def read(target: KubeRayTarget, environ: dict[str, str]) -> dict:
    api = KubeApi(credentials(target, environ))
    try:
        return api.get_rayservice("costgate")
    finally:
        api.close()


def test_in_a_pod_it_uses_the_service_account_token_and_ca(tls_api, ca, tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    target = KubeRayTarget(namespace=NAMESPACE, token_file=token, ca_file=ca[0])
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(tls_api.port)}
    creds = credentials(target, env)
    assert creds.server == f"https://127.0.0.1:{tls_api.port}"
    assert read(target, env)["metadata"]["name"] == "costgate"
    # a projected token is rotated in place: the next request reads the new one
    token.write_text("rotated")
    with pytest.raises(KubeApiError, match="HTTP 401"):
        read(target, env)


def test_a_server_the_cluster_ca_did_not_sign_is_refused(tls_api, tmp_path):
    other_ca, _ = self_signed_certificate(tmp_path, "other")
    token = tmp_path / "token"
    token.write_text(TOKEN)
    target = KubeRayTarget(namespace=NAMESPACE, token_file=token, ca_file=other_ca)
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(tls_api.port)}
    with pytest.raises(KubeApiError, match="CERTIFICATE_VERIFY_FAILED"):
        read(target, env)
    assert tls_api.requests == []  # no request got through


def test_a_kubeconfig_gives_server_ca_token_and_namespace(tls_api, ca, tmp_path):
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "current-context": "prod",
                "contexts": [
                    {"name": "dev", "context": {"cluster": "none", "user": "none"}},
                    {
                        "name": "prod",
                        "context": {"cluster": "c", "user": "u", "namespace": NAMESPACE},
                    },
                ],
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": tls_api.url,
                            "certificate-authority-data": base64.b64encode(
                                ca[0].read_bytes()
                            ).decode(),
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
            }
        )
    )
    target = KubeRayTarget(kubeconfig=kubeconfig)
    creds = credentials(target, {})
    assert (creds.server, creds.namespace) == (tls_api.url, NAMESPACE)
    assert read(target, {"KUBERNETES_SERVICE_HOST": "ignored: a kubeconfig was named"})
    # $KUBECONFIG when the config names none and we are not in a pod
    assert read(KubeRayTarget(), {"KUBECONFIG": str(kubeconfig)})["kind"] == "RayService"
    with pytest.raises(KubeApiError, match="no context named 'staging'"):
        credentials(KubeRayTarget(kubeconfig=kubeconfig, context="staging"), {})


def test_nothing_answering_is_an_error_that_says_where(tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    target = KubeRayTarget(api_server="http://127.0.0.1:1", namespace="ns", token_file=token)
    with pytest.raises(KubeApiError, match=r"reading RayService ns/costgate at http://127.0.0.1:1"):
        read(target, {})


def test_the_environment_picks_the_target_over_the_file():
    configured = RoutingTarget()
    env = {"COSTGATE_ROUTING_TARGET": "kuberay", "COSTGATE_KUBERAY_RAYSERVICE": "gw-prod"}
    picked = effective_target(configured, env)
    assert (picked.target, picked.kuberay.rayservice) == ("kuberay", "gw-prod")
    assert effective_target(configured, {}).target == "serve"
    with pytest.raises(ValueError, match="target"):
        effective_target(configured, {"COSTGATE_ROUTING_TARGET": "kubectl"})
    with pytest.raises(ValueError, match="rayservice"):
        effective_target(configured, {"COSTGATE_KUBERAY_RAYSERVICE": "Not_A_Name"})


def _status(generation: int, app: str, deployment: str) -> dict:
    return {
        "status": {
            "observedGeneration": generation,
            "activeServiceStatus": {
                "applicationStatuses": {
                    "costgate": {
                        "status": app,
                        "serveDeploymentStatuses": {"Gateway": {"status": deployment}},
                    }
                }
            },
        }
    }


def test_the_rollout_is_done_only_on_the_patched_generation_and_healthy():
    assert rayservice_rollout_state(_status(3, "RUNNING", "HEALTHY"), 3, "costgate", "Gateway")[0]
    waiting = [
        _status(2, "RUNNING", "HEALTHY"),  # the operator has not taken our patch yet
        _status(3, "DEPLOYING", "UPDATING"),
        {"status": {}},
    ]
    for state in waiting:
        assert not rayservice_rollout_state(state, 3, "costgate", "Gateway")[0]
    with pytest.raises(RolloutFailed, match="UNHEALTHY"):
        rayservice_rollout_state(_status(3, "RUNNING", "UNHEALTHY"), 3, "costgate", "Gateway")

"""The routing change as a patch of a RayService's serveConfigV2 (docs/kuberay.md).

Runs on the manifest the repo ships (deploy/k8s/costgate.yaml), generated from the same
config as `costgate up`, so the patch is checked against what a cluster would hold.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from gateway.control.declarative import (
    RoutingUpdateError,
    rayservice_json_patch,
    serve_config_change,
)
from gateway.domain.config import Config, load_config
from gateway.domain.routing_settings import RoutingError

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cfg() -> Config:
    return load_config(REPO / "deploy" / "config" / "costgate.yaml")


@pytest.fixture(scope="module")
def rayservice() -> dict:
    docs = yaml.safe_load_all((REPO / "deploy" / "k8s" / "costgate.yaml").read_text())
    (service,) = [d for d in docs if d and d.get("kind") == "RayService"]
    return service


def to_claude(current, static):
    weights = {"deepseek-v3.2": Decimal(0), "gemini-2.5-flash": Decimal(0)}
    weights["claude-sonnet-4.5"] = Decimal(100)
    return current.with_weights("auto", weights)


def test_patch_changes_only_the_ingress_user_config_and_the_version(cfg, rayservice) -> None:
    old_text = rayservice["spec"]["serveConfigV2"]
    serve_config = yaml.safe_load(old_text)
    new_config, before, after = serve_config_change(serve_config, "costgate", to_claude, cfg)
    assert after.version == before.version + 1
    test_op, replace_op = rayservice_json_patch(old_text, new_config)
    assert test_op == {"op": "test", "path": "/spec/serveConfigV2", "value": old_text}
    assert replace_op["op"] == "replace" and replace_op["path"] == "/spec/serveConfigV2"

    patched = yaml.safe_load(replace_op["value"])
    routing = patched["applications"][0]["deployments"][0]["user_config"]["routing"]
    assert routing["aliases"]["auto"] == {
        "deepseek-v3.2": "0",
        "gemini-2.5-flash": "0",
        "claude-sonnet-4.5": "100",
    }
    # everything else is as it was
    routing_before = serve_config["applications"][0]["deployments"][0]["user_config"]["routing"]
    assert {k: v for k, v in routing.items() if k not in ("aliases", "version")} == {
        k: v for k, v in routing_before.items() if k not in ("aliases", "version")
    }
    patched["applications"][0]["deployments"][0]["user_config"] = serve_config["applications"][0][
        "deployments"
    ][0]["user_config"]
    assert patched == serve_config
    assert yaml.safe_load(old_text) == serve_config  # the input was not touched


def test_bad_weights_make_no_patch(cfg, rayservice) -> None:
    serve_config = yaml.safe_load(rayservice["spec"]["serveConfigV2"])
    with pytest.raises(RoutingError):
        serve_config_change(
            serve_config,
            "costgate",
            lambda cur, static: cur.with_weights("auto", {"deepseek-v3.2": Decimal(0)}),
            cfg,
        )
    with pytest.raises(RoutingUpdateError, match="not in the Serve config"):
        serve_config_change(serve_config, "nope", to_claude, cfg)

"""`costgate scale`'s pure part: the declarative config with only the replica count (or the
autoscaling bounds) of the gateway's ingress changed; every other app and option kept."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway.control.replicas import ScaleError, scaled_config


def _config() -> dict[str, Any]:
    return {
        "proxy_location": "EveryNode",
        "http_options": {"host": "127.0.0.1", "port": 8000},
        "applications": [
            {
                "name": "costgate",
                "import_path": "gateway.replica.ingress:build",
                "deployments": [
                    {"name": "Gateway", "num_replicas": 2, "max_ongoing_requests": 256,
                     "user_config": {"routing": {"version": 7}}},
                ],
            },
            {"name": "bystander", "import_path": "x:app",
             "deployments": [{"name": "Probe", "num_replicas": 1}]},
        ],
    }  # fmt: skip


def _gateway(config: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = config["applications"][0]["deployments"][0]
    return d


def test_a_fixed_count_changes_num_replicas_only() -> None:
    before = _config()
    after = scaled_config(before, "costgate", "Gateway", replicas=4)
    assert _gateway(after)["num_replicas"] == 4
    assert _gateway(after)["user_config"] == {"routing": {"version": 7}}
    assert after["applications"][1] == before["applications"][1]
    assert before == _config()  # the input is not changed


def test_bounds_switch_to_autoscaling_and_keep_what_is_not_given() -> None:
    after = scaled_config(_config(), "costgate", "Gateway", min_replicas=2, max_replicas=4,
                          autoscaling={"upscale_delay_s": 3})  # fmt: skip
    d = _gateway(after)
    assert "num_replicas" not in d
    assert d["autoscaling_config"] == {
        "min_replicas": 2, "max_replicas": 4, "upscale_delay_s": 3, "target_ongoing_requests": 2,
    }  # fmt: skip
    again = scaled_config(after, "costgate", "Gateway", max_replicas=6)
    assert _gateway(again)["autoscaling_config"]["min_replicas"] == 2
    assert _gateway(again)["autoscaling_config"]["max_replicas"] == 6
    back = scaled_config(again, "costgate", "Gateway", replicas=3)
    assert _gateway(back)["num_replicas"] == 3 and "autoscaling_config" not in _gateway(back)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"replicas": 0}, {"replicas": 2, "max_replicas": 4},
     {"min_replicas": 5, "max_replicas": 4}],
)  # fmt: skip
def test_a_count_that_cannot_run_is_refused_before_anything_is_sent(kwargs: Any) -> None:
    with pytest.raises(ScaleError):
        scaled_config(copy.deepcopy(_config()), "costgate", "Gateway", **kwargs)


def test_a_per_node_bound_is_set_with_the_count() -> None:
    after = scaled_config(_config(), "costgate", "Gateway", replicas=4, max_per_node=2)
    assert _gateway(after)["max_replicas_per_node"] == 2 and _gateway(after)["num_replicas"] == 4


def test_an_unknown_application_is_named() -> None:
    with pytest.raises(ScaleError, match="nope"):
        scaled_config(_config(), "nope", "Gateway", replicas=2)

"""The update path's logic against Serve's REST shapes, with httpx.MockTransport.

What it proves without a cluster: every application is PUT back, only the ingress's
user_config changes, bad weights never leave the process, a concurrent writer is
detected, and refused credentials say so. The audit rows go to the test PostgreSQL
(test_routing_change_audit.py covers their life from pending to outcome).
tests/gateway/control/test_live_update.py runs the same path against a real Ray Serve
gateway.
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from db.routing_audit import list_routing_changes
from gateway.control.declarative import (
    RoutingUpdateError,
    declarative_config,
    ingress_deployment,
    live_routing,
    rollout_state,
    with_user_config,
)
from gateway.control.routing_update import RoutingConflict, apply_routing_settings
from gateway.control.serve_admin import ServeAdmin, ServeAdminError
from gateway.domain.config import Config, default_config_path, load_config
from gateway.domain.routing_settings import RoutingError, routing_from_config


@pytest.fixture(scope="module")
def cfg() -> Config:
    return load_config(default_config_path())


def app_details(name: str, ingress: str, user_config: Any, status: str = "HEALTHY") -> dict:
    """One application as GET /api/serve/applications/ reports it (Ray 2.60's fields)."""
    deployed = {
        "name": name,
        "route_prefix": "/" if name == "costgate" else f"/{name}",
        "import_path": "some.module:app",
        "deployments": [{"name": ingress, "num_replicas": 2, "user_config": user_config}],
    }
    return {
        "name": name,
        "route_prefix": deployed["route_prefix"],
        "status": "RUNNING" if status == "HEALTHY" else "DEPLOYING",
        "last_deployed_time_s": 1.0,
        "deployed_app_config": deployed,
        "source": "declarative",
        "deployments": {
            ingress: {
                "name": ingress,
                "status": status,
                "deployment_config": {"name": ingress, "user_config": user_config},
                "target_num_replicas": 2,
                "replicas": [
                    {"replica_id": "a", "state": "RUNNING", "pid": 101},
                    {"replica_id": "b", "state": "RUNNING", "pid": 102},
                ],
            }
        },
        "deployment_topology": {"ingress_deployment": ingress},
    }


def instance(cfg: Config, user_config: Any = None) -> dict:
    uc = user_config if user_config is not None else routing_from_config(cfg).to_user_config()
    return {
        "proxy_location": "HeadOnly",
        "http_options": {"host": "127.0.0.1", "port": 19303},
        "grpc_options": {"port": 9000, "grpc_servicer_functions": []},
        "target_capacity": None,
        "proxies": {},
        "applications": {
            "costgate": app_details("costgate", "Gateway", uc),
            "other": app_details("other", "Probe", {"x": 1}),
        },
    }


class FakeDashboard:
    """Serve's REST endpoint in memory: GET reports what the last PUT deployed."""

    def __init__(self, state: dict, token: str | None = None) -> None:
        self.state = state
        self.token = token
        self.puts: list[dict] = []
        self.gets = 0
        self.on_get: Any = None  # a hook to simulate another writer
        self.on_put: Any = None  # a hook that sees the PUT arrive (before Serve takes it)
        self.put_status = 200  # what Serve answers a PUT
        self.takes_puts = True  # False: the controller never takes the new config

    def handler(self, request: httpx.Request) -> httpx.Response:
        if self.token and request.headers.get("authorization") != f"Bearer {self.token}":
            return httpx.Response(401, text="Unauthorized: Missing authentication token")
        if request.method == "GET":
            self.gets += 1
            if self.on_get:
                self.on_get(self)
            return httpx.Response(200, json=self.state)
        body = json.loads(request.content)
        self.puts.append(body)
        if self.on_put:
            self.on_put(self)
        if self.put_status != 200:
            return httpx.Response(self.put_status, text="Traceback ...\nValueError: refused")
        for app in body["applications"] if self.takes_puts else ():
            current = self.state["applications"][app["name"]]
            current["deployed_app_config"] = app
            for d in app["deployments"]:
                current["deployments"][d["name"]]["deployment_config"]["user_config"] = d[
                    "user_config"
                ]
        return httpx.Response(200)

    def admin(self, token: str | None = None) -> ServeAdmin:
        return ServeAdmin(
            "http://dashboard", token=token, transport=httpx.MockTransport(self.handler)
        )


def set_auto(weights: dict[str, Decimal]):
    return lambda current, static: current.with_weights("auto", weights)


def apply(fake: FakeDashboard, change, cfg, database_url: str, **kw) -> Any:
    """One change through the update path; its audit rows, newest first."""
    result = apply_routing_settings(
        "http://dashboard",
        "costgate",
        change,
        actor=kw.pop("actor", "t"),
        note="n",
        database_url=database_url,
        audit_alias="auto",
        cfg=cfg,
        admin=kw.pop("admin", None) or fake.admin(),
        **kw,
    )
    return result, list_routing_changes(database_url)


def test_put_carries_every_application_and_only_the_ingress_user_config_changes(
    cfg, database_url, clean_ledger
) -> None:
    fake = FakeDashboard(instance(cfg))
    original = copy.deepcopy(fake.state)
    new = {"deepseek-v3.2": Decimal(0), "claude-sonnet-4.5": Decimal(100)}
    result, audits = apply(fake, set_auto(new), cfg, database_url)

    (body,) = fake.puts
    assert [a["name"] for a in body["applications"]] == ["costgate", "other"]
    assert body["applications"][1] == original["applications"]["other"]["deployed_app_config"]
    assert body["http_options"] == original["http_options"]
    assert "target_capacity" not in body  # None is not sent back
    routing = body["applications"][0]["deployments"][0]["user_config"]["routing"]
    assert routing["aliases"]["auto"] == {"deepseek-v3.2": "0", "claude-sonnet-4.5": "100"}
    assert routing["aliases"]["fast"] == {"gemini-2.5-flash": "70", "gpt-4o-mini": "30"}
    assert routing["version"] == 2
    assert (result.before.version, result.after.version) == (1, 2)
    assert result.in_place and result.pids_after == (101, 102)
    # the audit row holds the alias's weights before and after, exactly, and the outcome
    (audit,) = audits
    assert (audit.id, audit.actor, audit.app_name, audit.alias) == (
        result.audit_id,
        "t",
        "costgate",
        "auto",
    )
    assert audit.before == {
        "deepseek-v3.2": "60",
        "gemini-2.5-flash": "30",
        "claude-sonnet-4.5": "10",
    }
    assert audit.after == {"deepseek-v3.2": "0", "claude-sonnet-4.5": "100"}
    assert (audit.status, audit.version_before, audit.version_after) == ("applied", 1, 2)
    assert audit.outcome_at is not None and audit.outcome_at >= audit.changed_at


def test_every_change_moves_the_version_on_by_one(cfg, database_url, clean_ledger) -> None:
    fake = FakeDashboard(instance(cfg))
    versions = []
    for share in (10, 20, 30):
        result, rows = apply(fake, set_auto({"deepseek-v3.2": Decimal(share)}), cfg, database_url)
        versions.append(result.after.version)
    assert versions == [2, 3, 4]
    # the lock was released after each change, or the next one would have been refused
    assert [(r.version_before, r.version_after, r.status) for r in rows] == [
        (3, 4, "applied"),
        (2, 3, "applied"),
        (1, 2, "applied"),
    ]


def test_invalid_weights_are_refused_and_nothing_is_sent(cfg, database_url, clean_ledger) -> None:
    fake = FakeDashboard(instance(cfg))
    for bad in (
        {"deepseek-v3.2": Decimal(-5)},
        {"deepseek-v3.2": Decimal(0), "gemini-2.5-flash": Decimal(0)},
    ):
        with pytest.raises(RoutingError):
            apply(fake, set_auto(bad), cfg, database_url)
    unknown = apply_settings_unknown_model(cfg)
    with pytest.raises(RoutingError, match="unknown model"):
        apply(fake, unknown, cfg, database_url)
    assert fake.puts == []
    # refused before anything was locked or written: no row either
    assert list_routing_changes(database_url) == []


def apply_settings_unknown_model(cfg):
    def change(current, static):
        data = current.model_dump()
        data["aliases"]["auto"] = {"gpt-9": Decimal(1)}
        return type(current).model_validate(data)

    return change


def test_a_writer_in_between_is_detected_and_nothing_is_sent(
    cfg, database_url, clean_ledger
) -> None:
    fake = FakeDashboard(instance(cfg))

    def other_writer(f: FakeDashboard) -> None:
        if f.gets == 2:  # between our read and our write
            uc = f.state["applications"]["costgate"]["deployments"]["Gateway"]
            uc["deployment_config"]["user_config"] = (
                routing_from_config(cfg).model_copy(update={"version": 5}).to_user_config()
            )

    fake.on_get = other_writer
    with pytest.raises(RoutingConflict, match="version 5"):
        apply(fake, set_auto({"deepseek-v3.2": Decimal(1)}), cfg, database_url)
    assert fake.puts == []
    # the refused change is in the trail, with the version it was made for
    (row,) = list_routing_changes(database_url)
    assert (row.status, row.version_before, row.version_after) == ("failed", 1, 2)
    assert row.outcome_at is not None


def test_refused_credentials_say_so(cfg, database_url, clean_ledger) -> None:
    fake = FakeDashboard(instance(cfg), token="s3cret")
    with pytest.raises(ServeAdminError, match="refused our credentials"):
        fake.admin().instance()
    assert fake.admin("s3cret").instance()["applications"]
    # the update path says the same, as its own error
    with pytest.raises(RoutingUpdateError, match="refused our credentials"):
        apply(fake, set_auto({"deepseek-v3.2": Decimal(1)}), cfg, database_url)
    assert fake.puts == []
    assert list_routing_changes(database_url) == []  # refused at the first read


def test_an_imperatively_deployed_app_stops_the_change(cfg) -> None:
    state = instance(cfg)
    state["applications"]["other"]["deployed_app_config"] = None
    with pytest.raises(RoutingUpdateError, match="not deployed declaratively"):
        declarative_config(state)


def test_missing_app_names_the_running_ones(cfg) -> None:
    with pytest.raises(RoutingUpdateError, match=r"running: costgate, other"):
        live_routing(instance(cfg), "nope", cfg)


def test_user_config_is_added_for_an_ingress_the_config_did_not_list(cfg) -> None:
    decl = {"applications": [{"name": "costgate", "import_path": "m:app"}]}
    out = with_user_config(decl, "costgate", "Gateway", {"routing": {"version": 2}})
    assert out["applications"][0]["deployments"] == [
        {"name": "Gateway", "user_config": {"routing": {"version": 2}}}
    ]
    assert "deployments" not in decl["applications"][0]  # the input is left alone


def test_ingress_is_found_without_a_topology(cfg) -> None:
    app = app_details("costgate", "Gateway", {"routing": {}})
    del app["deployment_topology"]
    app["deployments"]["Helper"] = {"name": "Helper", "deployment_config": {"user_config": None}}
    assert ingress_deployment(app) == "Gateway"


def test_rollout_waits_for_the_new_config_and_a_healthy_deployment(cfg) -> None:
    new = {"routing": {"version": 9}}
    state = instance(cfg)
    assert rollout_state(state, "costgate", "Gateway", new)[0] is False
    state["applications"]["costgate"] = app_details("costgate", "Gateway", new, "UPDATING")
    done, why = rollout_state(state, "costgate", "Gateway", new)
    assert not done and "UPDATING" in why
    state["applications"]["costgate"] = app_details("costgate", "Gateway", new)
    assert rollout_state(state, "costgate", "Gateway", new) == (True, "healthy on the new config")
    state["applications"]["costgate"] = app_details("costgate", "Gateway", new, "DEPLOY_FAILED")
    with pytest.raises(RoutingUpdateError, match="DEPLOY_FAILED"):
        rollout_state(state, "costgate", "Gateway", new)

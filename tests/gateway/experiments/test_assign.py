"""Variant assignment: deterministic per sticky key, on the split's shares, within the
experiment's apps and time; the variant's weights reach the route plan."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from decimal import Decimal

import pytest

from gateway.domain.config import default_config_path, load_config
from gateway.domain.routing_settings import RoutingError, parse_routing, routing_from_config
from gateway.experiments.assign import Assigner, bucket
from gateway.experiments.spec import Experiment, parse_variant
from gateway.routing.policy import Health, plan_route

T0 = dt.datetime(2026, 12, 4, 12, tzinfo=dt.UTC)
A = {"gpt-4o-mini": Decimal(1)}
B = {"deepseek-v3.2": Decimal(70), "gpt-4o-mini": Decimal(30)}


def experiment(**kw: object) -> Experiment:
    fields: dict[str, object] = {"alias": "auto", "variants": {"a": A, "b": B},
                                 "split": {"a": 50, "b": 50}, "started_at": T0}  # fmt: skip
    return Experiment.model_validate(fields | kw)


def sticky(user: str | None = None, session: str | None = None,
           request: str = "r") -> dict[str, str | None]:  # fmt: skip
    return {"user": user, "session": session, "request": request}


def test_the_same_user_always_gets_the_same_variant_on_every_replica() -> None:
    replicas = [Assigner({"e1": experiment()}) for _ in range(3)]
    for i in range(200):
        got = {r.assign("auto", "app", sticky(f"u{i}", request=str(i * k)), T0).variant  # type: ignore[union-attr]
               for k, r in enumerate(replicas, 1)}  # fmt: skip
        assert len(got) == 1


def test_the_split_is_honoured_across_users() -> None:
    assigner = Assigner({"e1": experiment(split={"a": 20, "b": 80})})
    seen = Counter(assigner.assign("auto", "app", sticky(f"user-{i}"), T0).variant  # type: ignore[union-attr]
                   for i in range(10_000))  # fmt: skip
    assert 1_800 < seen["a"] < 2_200 and seen["a"] + seen["b"] == 10_000


def test_by_session_and_by_request() -> None:
    by_session = Assigner({"e1": experiment(stick="session")})
    assert by_session.assign("auto", "app", sticky("u1"), T0) is None  # no session: left out
    got = {by_session.assign("auto", "app", sticky(f"u{i}", "s-9"), T0).variant  # type: ignore[union-attr]
           for i in range(50)}  # fmt: skip
    assert len(got) == 1
    by_request = Assigner({"e1": experiment(stick="request")})
    variants = {by_request.assign("auto", "app", sticky("u1", request=str(i)), T0).variant  # type: ignore[union-attr]
                for i in range(100)}  # fmt: skip
    assert variants == {"a", "b"}


def test_other_aliases_other_apps_users_without_an_id_and_stopped_ones_are_left_out() -> None:
    assigner = Assigner({"e1": experiment(apps=("search",), until=T0 + dt.timedelta(hours=1))})
    assert assigner.assign("fast", "search", sticky("u1"), T0) is None
    assert assigner.assign("auto", "support", sticky("u1"), T0) is None
    assert assigner.assign("auto", "search", sticky(None), T0) is None
    assert assigner.assign("auto", "search", sticky("u1"), T0 + dt.timedelta(hours=2)) is None
    assert assigner.assign("auto", "search", sticky("u1"), T0) is not None
    assert not Assigner({"e1": experiment(stopped_at=T0)})


def test_max_requests_is_each_replicas_share() -> None:
    assigner = Assigner({"e1": experiment(max_requests=10)})
    got = [assigner.assign("auto", "app", sticky(f"u{i}"), T0, replicas=2) for i in range(8)]
    assert sum(g is not None for g in got) == 5


def test_buckets_are_uniform_enough_and_depend_on_the_experiment() -> None:
    points = [bucket("e1", f"u{i}") for i in range(5_000)]
    assert 0.45 < sum(points) / len(points) < 0.55
    assert bucket("e1", "u1") != bucket("e2", "u1")


def test_a_variants_weights_route_the_request() -> None:
    cfg = load_config(default_config_path())
    plan = plan_route("auto", cfg, routing_from_config(cfg), Health(), {}, random.Random(1),
                      mix=A)  # fmt: skip
    assert not isinstance(plan, type(None)) and plan.models[0] == "gpt-4o-mini"  # type: ignore[union-attr]


def test_the_cli_variant_form() -> None:
    assert parse_variant("a=gpt-4o-mini") == ("a", A)
    assert parse_variant("b=deepseek-v3.2:70,gpt-4o-mini:30") == ("b", B)
    for bad in ("a", "=x", "a=", "a=m:x", "a=m:1,m:2"):
        with pytest.raises(ValueError):
            parse_variant(bad)


def test_live_settings_refuse_unknown_aliases_models_and_two_running_on_one_alias() -> None:
    cfg = load_config(default_config_path())
    base = routing_from_config(cfg).model_dump(mode="json")

    def parse(**exps: Experiment) -> object:
        data = {**base, "experiments": {n: e.model_dump(mode="json") for n, e in exps.items()}}
        return parse_routing({"routing": data}, cfg)

    assert parse(e1=experiment())
    with pytest.raises(RoutingError, match="unknown alias"):
        parse(e1=experiment(alias="nope"))
    with pytest.raises(RoutingError, match="unknown model"):
        parse(e1=experiment(variants={"a": A, "b": {"gpt-9": Decimal(1)}}))
    with pytest.raises(RoutingError, match="already has a running one"):
        parse(e1=experiment(), e2=experiment())
    assert parse(e1=experiment(stopped_at=T0), e2=experiment())
    with pytest.raises(ValueError):
        experiment(split={"a": 50})

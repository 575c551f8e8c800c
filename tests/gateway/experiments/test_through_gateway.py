"""An experiment on the request path: the plain gateway (GatewayService and its HTTP app
under uvicorn) against the sim, its live settings swapped as `reconfigure()` does.
Each end user's requests all go by one variant's mix, recorded on the row; requests
that fall outside it (no end user, a forced model) are routed and recorded as before."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.domain.routing_settings import routing_from_config

VARIANTS = {"cheap": {"deepseek-v3.2": 1}, "dear": {"gpt-4.1": 1}}


@pytest.fixture
def experiment_gw(gw: Any) -> Iterator[Any]:
    service = gw.service
    base = routing_from_config(service.cfg).model_dump(mode="json")
    exp = {"alias": "auto", "variants": VARIANTS, "split": {"cheap": 50, "dear": 50},
           "stick": "user", "started_at": dt.datetime.now(dt.UTC).isoformat()}  # fmt: skip
    service.apply_user_config({"routing": {**base, "experiments": {"e1": exp}}})
    yield gw
    service.apply_user_config(None)


def _ask(gw: Any, client: httpx.Client, user: str | None, **headers: str) -> None:
    body: dict[str, Any] = {"model": "auto", "max_tokens": 8,
                            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    if user is not None:
        body["user"] = user
    r = client.post("/v1/chat/completions", json=body, headers=headers)
    assert r.status_code == 200, r.text


def test_each_user_gets_one_variant_and_its_mix(experiment_gw: Any) -> None:
    gw = experiment_gw
    with httpx.Client(base_url=gw.base_url, timeout=30, headers=gw.headers) as client:
        for _ in range(3):
            for i in range(20):
                _ask(gw, client, f"user-{i}")
    records = gw.wait_records(60)
    assert len(records) == 60
    by_user: dict[str, set[tuple[str | None, str | None]]] = defaultdict(set)
    for r in records:
        assert r.experiment == "e1" and r.variant in VARIANTS
        assert r.model == next(iter(VARIANTS[r.variant]))  # the variant's only model
        by_user[r.end_user or ""].add((r.experiment, r.variant))
    assert len(by_user) == 20 and all(len(v) == 1 for v in by_user.values())
    assert {v for s in by_user.values() for _, v in s} == set(VARIANTS)


def test_requests_outside_the_experiment_are_not_recorded_in_it(experiment_gw: Any) -> None:
    gw = experiment_gw
    with httpx.Client(base_url=gw.base_url, timeout=30, headers=gw.headers) as client:
        _ask(gw, client, None)  # no end user: sticks by nothing
        _ask(gw, client, "user-1", **{"x-costgate-model": "gpt-4o-mini"})
    plain, forced = gw.wait_records(2)
    assert (plain.experiment, plain.variant) == (None, None)
    assert (forced.experiment, forced.model) == (None, "gpt-4o-mini")

"""`x-costgate-priority: quality` on the request path: the plain gateway (GatewayService and
its HTTP app under uvicorn) against the sim, with hand-set feedback scores in the
replica's loaded figures: the cheapest model above the floor answers, and the weights
decide while the scores are too few."""

from __future__ import annotations

from typing import Any

import httpx

from gateway.routing.policy import window_days

CHEAP, MID, DEAR = "deepseek-v3.2", "gemini-2.5-flash", "claude-sonnet-4.5"


def _ask(gw: Any) -> tuple[str, Any]:
    before = len(gw.records)
    body = {"model": "auto", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=gw.base_url, timeout=30, headers=gw.headers) as client:
        r = client.post("/v1/chat/completions", json=body,
                        headers={"x-costgate-priority": "quality"})  # fmt: skip
    assert r.status_code == 200, r.text
    return r.headers["x-costgate-model"], gw.wait_records(before + 1)[before]


def test_the_header_routes_by_the_loaded_quality_figures(gw: Any) -> None:
    service = gw.service
    days = window_days(service.cfg.aliases["auto"].quality_window)
    floor = service.cfg.aliases["auto"].min_quality
    enough = service.cfg.aliases["auto"].min_feedback
    try:
        service.quality = {days: {CHEAP: (floor - 0.2, enough * 2), MID: (floor + 0.05, enough),
                                  DEAR: (0.99, enough * 3)}}  # fmt: skip
        for _ in range(3):
            model, record = _ask(gw)
            assert model == MID and record.routing_policy == "quality"
        service.quality = {days: {MID: (0.99, enough - 1)}}  # too few scores
        model, record = _ask(gw)
        assert record.routing_policy == "weighted"
    finally:
        service.quality = {}

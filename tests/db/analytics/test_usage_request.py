"""The usage API's parameters, buckets, pages and money encoding (pure)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from db.analytics.usage_request import (
    UsageParamError,
    build_page,
    decode_cursor,
    encode_cursor,
    encode_json,
    parse_query,
)

DAY = 86_400
T0 = 1_764_547_200  # 2025-12-01 00:00 UTC
NOW = T0 + 10 * DAY


def _q(kind: str = "completions", **params: object):  # type: ignore[no-untyped-def]
    items = []
    for k, v in params.items():
        for one in v if isinstance(v, list) else [v]:
            items.append((k, str(one)))
    return parse_query(kind, items, NOW)  # type: ignore[arg-type]


def test_defaults_are_daily_buckets_up_to_now_seven_per_page() -> None:
    q = _q(start_time=T0)
    assert (q.width, q.start, q.end, q.limit) == ("1d", T0, NOW, 7)
    assert q.buckets()[0] == (T0, T0 + DAY) and len(q.buckets()) == 7


def test_times_are_rounded_out_to_whole_buckets() -> None:
    q = _q(start_time=T0 + 3700, end_time=T0 + 7300, bucket_width="1h")
    assert (q.start, q.end) == (T0 + 3600, T0 + 3 * 3600)


def test_group_by_accepts_repeated_bracketed_and_comma_forms() -> None:
    items = [("start_time", str(T0)), ("group_by[]", "model"), ("group_by", "project_id,team")]
    q = parse_query("completions", items, NOW)
    assert q.group_by == ("model", "project_id", "team")


def test_group_by_batch_is_served_for_completions_only() -> None:
    q = parse_query("completions", [("start_time", str(T0)), ("group_by", "batch")], NOW)
    assert q.group_by == ("batch",)
    with pytest.raises(UsageParamError):
        parse_query("costs", [("start_time", str(T0)), ("group_by", "batch")], NOW)


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "start_time"),
        ({"start_time": "yesterday"}, "start_time"),
        ({"start_time": -5}, "start_time"),
        ({"start_time": 10**15}, "start_time"),
        ({"start_time": T0, "end_time": T0}, "end_time"),
        ({"start_time": T0, "bucket_width": "1w"}, "bucket_width"),
        ({"start_time": T0, "limit": 0}, "limit"),
        ({"start_time": T0, "limit": 181}, "limit"),
        ({"start_time": T0, "bucket_width": "1h", "limit": 169}, "limit"),
        ({"start_time": T0, "limit": "ten"}, "limit"),
        ({"start_time": T0, "group_by": "line_item"}, "group_by"),
        ({"start_time": T0, "group_by": "colour"}, "group_by"),
        ({"start_time": T0, "page": "not-a-cursor!"}, "page"),
        ({"start_time": T0, "page": encode_cursor(T0 - DAY)}, "page"),
        ({"start_time": T0, "tags": "no-separator"}, "tags"),
        ({"start_time": T0, "colour": "red"}, "colour"),
        ({"start_time": [T0, T0 + 1]}, "start_time"),
    ],
)
def test_a_bad_parameter_is_named(params: dict[str, object], param: str) -> None:
    with pytest.raises(UsageParamError) as err:
        _q(**params)
    assert err.value.param == param


def test_costs_group_by_line_item() -> None:
    assert _q("costs", start_time=T0, group_by="line_item").group_by == ("line_item",)


def test_pages_walk_the_range_with_cursors_until_has_more_is_false() -> None:
    q = _q(start_time=T0, end_time=T0 + 10 * DAY, limit=4)
    seen, cursors = [], []
    while True:
        page = build_page(q, [])
        seen += [b["start_time"] for b in page["data"]]
        if not page["has_more"]:
            assert page["next_page"] is None
            break
        cursors.append(page["next_page"])
        q = _q(start_time=T0, end_time=T0 + 10 * DAY, limit=4, page=page["next_page"])
    assert seen == [T0 + i * DAY for i in range(10)]
    assert [decode_cursor(c) for c in cursors] == [T0 + 4 * DAY, T0 + 8 * DAY]


def test_page_has_every_bucket_and_openai_result_fields() -> None:
    q = _q(start_time=T0, end_time=T0 + 2 * DAY, group_by="model")
    row = {
        "bucket": T0 + DAY, "model": "gpt-4.1", "requests": 3, "prompt_tokens": 30,
        "cached_prompt_tokens": 10, "completion_tokens": 9, "unknown_cost_requests": 0,
        "actual_cost_usd": Decimal("0.1"), "list_cost_usd": Decimal("0.2"),
        "baseline_cost_usd": Decimal("0.3"),
    }
    page = build_page(q, [row])
    assert page["object"] == "page" and [b["results"] for b in page["data"]][0] == []
    result = page["data"][1]["results"][0]
    assert result["object"] == "organization.usage.completions.result"
    assert (result["input_tokens"], result["output_tokens"], result["input_cached_tokens"]) == (
        30, 9, 10,
    )
    assert result["num_model_requests"] == 3 and result["model"] == "gpt-4.1"
    assert result["project_id"] is None and result["api_key_id"] is None


def test_costs_result_carries_amount_and_line_item() -> None:
    q = _q("costs", start_time=T0, end_time=T0 + DAY, group_by=["line_item", "project_id"])
    row = {
        "bucket": T0, "model": "gpt-4.1", "provider": "relay", "project_id": "search",
        "requests": 2, "unknown_cost_requests": 1, "actual_cost_usd": Decimal("0.0000000001"),
        "list_cost_usd": None, "baseline_cost_usd": Decimal("2"),
    }
    result = build_page(q, [row])["data"][0]["results"][0]
    assert result["object"] == "organization.costs.result"
    assert result["amount"] == {"value": Decimal("0.0000000001"), "currency": "usd"}
    assert result["line_item"] == "gpt-4.1, relay" and result["project_id"] == "search"
    assert result["list_amount"]["value"] is None  # unknown, not $0
    assert result["model"] is None  # not asked for by name


def test_money_is_encoded_as_the_exact_number() -> None:
    body = {"a": Decimal("12345678901234.0000000001"), "b": [Decimal("0E-10"), None, "x"]}
    text = encode_json(body).decode()
    assert text == '{"a":12345678901234.0000000001,"b":[0.0000000000,null,"x"]}'
    assert json.loads(text, parse_float=Decimal)["a"] == Decimal("12345678901234.0000000001")

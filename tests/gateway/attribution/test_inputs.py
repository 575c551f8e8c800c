"""Reading and bounding a request's end user, session and tags (pure)."""

from __future__ import annotations

import pytest

from gateway.attribution.inputs import (
    NO_ATTRIBUTION,
    AttributionError,
    KeyTags,
    Sources,
    parse_tags_header,
    read_attribution,
)

OPENAI = Sources(openai_user=True, openai_metadata=True)
ANTHROPIC = Sources(anthropic_metadata=True)


def test_nothing_given_is_no_attribution() -> None:
    assert read_attribution({}, {"model": "m"}, OPENAI) is NO_ATTRIBUTION


def test_the_end_user_comes_from_the_header_then_safety_identifier_then_user() -> None:
    body = {"user": "u-body", "safety_identifier": "u-safety"}
    assert read_attribution({}, body, OPENAI).end_user == "u-safety"
    assert read_attribution({}, {"user": "u-body"}, OPENAI).end_user == "u-body"
    headers = {"x-costgate-user": "u-header"}
    assert read_attribution(headers, body, OPENAI).end_user == "u-header"


def test_anthropic_metadata_user_id_is_the_end_user_and_not_a_tag() -> None:
    found = read_attribution({}, {"metadata": {"user_id": "c-1"}}, ANTHROPIC)
    assert found.end_user == "c-1" and found.tags is None
    # an API without the field: a body `user` is not read
    assert read_attribution({}, {"user": "x"}, ANTHROPIC) is NO_ATTRIBUTION


def test_tags_merge_key_defaults_then_metadata_then_the_header() -> None:
    key = KeyTags(defaults={"env": "prod", "feature": "default"})
    found = read_attribution(
        {"x-costgate-tags": " feature = search , tier=gold,"},
        {"metadata": {"feature": "body", "plan": "pro"}},
        OPENAI,
        key,
    )
    assert found.tags == {"env": "prod", "feature": "search", "plan": "pro", "tier": "gold"}


def test_metadata_is_no_tag_source_where_the_api_has_none() -> None:
    found = read_attribution({}, {"metadata": {"a": "b"}}, Sources(openai_user=True))
    assert found is NO_ATTRIBUTION


def test_the_session_comes_from_its_header() -> None:
    assert read_attribution({"x-costgate-session": "s-1"}, {}, OPENAI).session_id == "s-1"


@pytest.mark.parametrize(
    ("headers", "body", "param"),
    [
        ({}, {"user": "u" * 257}, "user"),
        ({}, {"user": ""}, "user"),
        ({}, {"user": 7}, "user"),
        ({}, {"safety_identifier": "a\x00b"}, "safety_identifier"),
        ({"x-costgate-user": "u" * 257}, {}, "x-costgate-user"),
        ({"x-costgate-session": "s\tx"}, {}, "x-costgate-session"),
        ({}, {"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({}, {"metadata": {"k" * 65: "v"}}, "metadata key"),
        ({}, {"metadata": {"k": "v" * 513}}, "metadata"),
        ({}, {"metadata": {"k": 1}}, "metadata"),
        ({}, {"metadata": ["k"]}, "metadata"),
        ({"x-costgate-tags": "novalue"}, {}, "x-costgate-tags"),
        ({"x-costgate-tags": "=v"}, {}, "x-costgate-tags key"),
        ({"x-costgate-tags": ",".join(f"k{i}=v" for i in range(17))}, {}, "x-costgate-tags"),
    ],
)
def test_values_out_of_bounds_name_their_field(
    headers: dict[str, str], body: dict[str, object], param: str
) -> None:
    with pytest.raises(AttributionError) as caught:
        read_attribution(headers, body, OPENAI)
    assert caught.value.param == param


def test_sixteen_tags_from_two_sources_together_are_bounded_too() -> None:
    metadata = {f"m{i}": "v" for i in range(10)}
    header = ",".join(f"h{i}=v" for i in range(7))
    with pytest.raises(AttributionError) as caught:
        read_attribution({"x-costgate-tags": header}, {"metadata": metadata}, OPENAI)
    assert "17 tags" in caught.value.message


def test_a_bound_is_inclusive() -> None:
    found = read_attribution(
        {"x-costgate-session": "s" * 256},
        {"user": "u" * 256, "metadata": {"k" * 64: "v" * 512}},
        OPENAI,
    )
    assert found.end_user == "u" * 256 and found.tags == {"k" * 64: "v" * 512}


def test_a_restricted_key_refuses_other_tag_keys_but_keeps_its_defaults() -> None:
    key = KeyTags(defaults={"env": "prod"}, allowed_keys=frozenset({"feature"}))
    found = read_attribution({"x-costgate-tags": "feature=a"}, {}, OPENAI, key)
    assert found.tags == {"env": "prod", "feature": "a"}
    with pytest.raises(AttributionError) as caught:
        read_attribution({}, {"metadata": {"team": "x"}}, OPENAI, key)
    assert "'team'" in caught.value.message


def test_the_tags_header_parses_pairs() -> None:
    assert parse_tags_header("a=1, b = two ,c=") == {"a": "1", "b": "two", "c": ""}

"""The quality signals read off an answer: finish reason, refusal, JSON mode and
structured outputs, tool call arguments against their tool's schema."""

from __future__ import annotations

import json
from typing import Any

from gateway.quality.signals import Signals, chat_signals, stream_signals

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}},
          "required": ["city"], "additionalProperties": False}  # fmt: skip
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": SCHEMA}}]


def answer(content: str | None = "hi", finish: str = "stop", **message: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content, **message}}]}


def call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_plain_answer_carries_its_finish_reason_and_nothing_to_check() -> None:
    assert chat_signals({}, answer()) == Signals("stop", False, None, None)
    assert chat_signals({}, answer(finish="length")).finish_reason == "length"
    assert chat_signals({}, answer(finish="content_filter")).finish_reason == "content_filter"


def test_a_refusal_is_flagged() -> None:
    assert chat_signals({}, answer(None, refusal="I can't help with that.")).refusal is True


def test_json_mode_flags_an_answer_that_does_not_parse() -> None:
    req = {"response_format": {"type": "json_object"}}
    assert chat_signals(req, answer('{"a": 1}')).json_valid is True
    assert chat_signals(req, answer('{"a": 1')).json_valid is False
    assert chat_signals({"response_format": {"type": "text"}}, answer("{")).json_valid is None


def test_structured_outputs_flag_an_answer_that_breaks_the_schema() -> None:
    req = {"response_format": {"type": "json_schema",
                               "json_schema": {"name": "w", "schema": SCHEMA}}}  # fmt: skip
    assert chat_signals(req, answer('{"city": "Oslo"}')).json_valid is True
    assert chat_signals(req, answer('{"city": 7}')).json_valid is False
    assert chat_signals(req, answer('{"town": "Oslo"}')).json_valid is False


def test_tool_calls_are_checked_against_their_tools_schema() -> None:
    req = {"tools": TOOLS}
    ok = answer(None, "tool_calls", tool_calls=[call("weather", '{"city": "Oslo"}')])
    assert chat_signals(req, ok).tool_args_valid is True
    for bad in ('{"city": 1}', "[1]", '{"city": "Os', "null"):
        broken = answer(None, "tool_calls", tool_calls=[call("weather", bad)])
        assert chat_signals(req, broken).tool_args_valid is False, bad
    unknown = answer(None, "tool_calls", tool_calls=[call("stocks", "{}")])
    assert chat_signals(req, unknown).tool_args_valid is False
    assert chat_signals(req, answer()).tool_args_valid is None


def test_a_schema_with_a_remote_ref_is_never_fetched_and_checks_only_the_parse() -> None:
    # 192.0.2.0/24 is TEST-NET-1: a fetch would hang or fail, never pass
    schema = {"$ref": "http://192.0.2.1/schema.json"}
    req = {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    assert chat_signals(req, answer('{"x": 1}')).json_valid is True
    assert chat_signals(req, answer("{")).json_valid is False


def test_a_streams_text_is_checked_in_json_mode_unless_tools_could_be_called() -> None:
    req: dict[str, Any] = {"response_format": {"type": "json_object"}}
    assert stream_signals(req, "stop", json.dumps({"a": 1})) == Signals("stop", None, True)
    assert stream_signals(req, "length", '{"a"').json_valid is False
    assert stream_signals({**req, "tools": TOOLS}, "stop", "{").json_valid is None


def test_answers_of_odd_shapes_give_no_signals_rather_than_failing() -> None:
    for odd in ({}, {"choices": []}, {"choices": ["x"]}, {"choices": [{"message": "x"}]}):
        assert chat_signals({"tools": "x", "response_format": "x"}, odd).json_valid is None

"""Which provider objects a request names and an answer creates (pure)."""

from __future__ import annotations

import json

import pytest

from gateway.domain.endpoints import Endpoint
from gateway.replica.objects.references import (
    MAX_REFERENCES,
    BadReference,
    created,
    created_in_event,
    referenced,
)


def ids(refs):
    return [(r.kind, r.object_id, r.param) for r in refs]


def test_the_ids_a_messages_request_names():
    body = {"container": "cntr_1", "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "file", "file_id": "file_1"}},
        {"type": "image", "source": {"type": "base64", "data": "x"}}]}]}  # fmt: skip
    assert ids(referenced(Endpoint.MESSAGES, body)) == [
        ("container", "cntr_1", "container"), ("file", "file_1", "messages.file_id")]


def test_chat_file_parts_are_named_and_embeddings_name_nothing():
    body = {"messages": [{"role": "user", "content": [
        {"type": "file", "file": {"file_id": "file-abc"}}]}]}  # fmt: skip
    assert ids(referenced(Endpoint.CHAT_COMPLETIONS, body)) == [
        ("file", "file-abc", "messages.file_id")]
    assert referenced(Endpoint.EMBEDDINGS, {"input": [{"file_id": "x"}]}) == []


@pytest.mark.parametrize("body", [
    {"previous_response_id": 5},
    {"conversation": {"id": ["x"]}},
    {"previous_response_id": ""},
    {"previous_response_id": "r" * 300},
    {"tools": [{"type": "file_search", "vector_store_ids": [f"vs_{i}" for i in range(65)]}]},
])
def test_a_malformed_or_excessive_reference_is_the_clients_error(body):
    with pytest.raises(BadReference):
        referenced(Endpoint.RESPONSES, body)
    assert MAX_REFERENCES == 64


def test_what_an_answer_and_a_streams_first_event_create():
    answer = {"id": "resp_1", "output": [{"type": "code_interpreter_call",
                                          "container_id": "cntr_2"}]}  # fmt: skip
    assert ids(created(Endpoint.RESPONSES, answer)) == [
        ("response", "resp_1", "id"), ("container", "cntr_2", "output")]
    event = json.dumps({"type": "response.created", "response": {"id": "resp_9"}}).encode()
    assert ids(created_in_event(Endpoint.RESPONSES, event)) == [("response", "resp_9", "id")]
    start = json.dumps({"type": "message_start", "message": {
        "id": "msg_1", "container": {"id": "cntr_3"}}}).encode()  # fmt: skip
    assert ids(created_in_event(Endpoint.MESSAGES, start)) == [
        ("container", "cntr_3", "container")]
    assert created_in_event(Endpoint.CHAT_COMPLETIONS, event) == []
    assert created_in_event(Endpoint.RESPONSES, b"[DONE]") == []


def test_only_events_that_wrap_an_object_are_parsed(monkeypatch):
    from gateway.replica.objects import references

    parsed: list[bytes] = []
    real = references.json_codec.loads
    monkeypatch.setattr(references.json_codec, "loads", lambda b: parsed.append(b) or real(b))
    # a text delta, a Responses delta and a chat chunk (a Messages stream translated from
    # chat) are skipped on the way to the first token: none wraps what was created
    for endpoint, event in [
        (Endpoint.MESSAGES, b'{"type":"content_block_delta","delta":{"text":"hi"}}'),
        (Endpoint.RESPONSES, b'{"type":"response.output_text.delta","delta":"x"}'),
        (Endpoint.MESSAGES, b'{"object":"chat.completion.chunk","choices":[]}'),
    ]:
        assert created_in_event(endpoint, event) == []
    assert parsed == []
    # the wrapper's key with spaces around it is still found
    start = b'{"type": "message_start", "message" : {"id": "m", "container": {"id": "c"}}}'
    assert ids(created_in_event(Endpoint.MESSAGES, start)) == [("container", "c", "container")]
    assert parsed == [start]

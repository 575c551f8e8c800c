"""The simulator's legacy completions, embeddings and Responses, reached with the openai
SDK like a provider: realistic usage, streams, and the same fault knobs as chat."""

from __future__ import annotations

import base64
import struct

import httpx
import openai
import pytest

from gateway.devtools.sim.tokens import count_text


@pytest.fixture
def client(sim):
    return openai.OpenAI(base_url=sim.provider_url("openai"), api_key="sk-sim-test",
                         max_retries=0, timeout=10)


def test_embeddings_count_the_input_tokens_and_honour_dimensions(client):
    texts = ["The ledger balances.", "Every API goes through it."]
    reply = client.embeddings.create(model="text-embedding-3-small", input=texts,
                                     dimensions=64)
    assert [len(d.embedding) for d in reply.data] == [64, 64]
    assert reply.usage.prompt_tokens == sum(count_text(t) for t in texts)
    assert reply.usage.total_tokens == reply.usage.prompt_tokens
    again = client.embeddings.create(model="text-embedding-3-small", input=texts[0],
                                     dimensions=64, encoding_format="float")
    assert again.data[0].embedding == pytest.approx(reply.data[0].embedding, abs=1e-6)


def test_embeddings_of_token_arrays_count_the_tokens_and_base64_decodes(sim):
    body = {"model": "text-embedding-3-small", "input": [[1, 2, 3], [4, 5]],
            "encoding_format": "base64"}
    reply = httpx.post(sim.provider_url("openai") + "/embeddings", json=body).json()
    assert reply["usage"]["prompt_tokens"] == 5
    vector = struct.unpack("<1536f", base64.b64decode(reply["data"][0]["embedding"]))
    assert abs(sum(v * v for v in vector) - 1) < 1e-3


def test_a_legacy_completion_counts_the_prompt_as_it_is(client):
    reply = client.completions.create(model="gpt-4o-mini", prompt="Once upon a time",
                                      max_tokens=10)
    assert reply.object == "text_completion" and reply.choices[0].text
    assert reply.usage.prompt_tokens == count_text("Once upon a time")
    assert 1 <= reply.usage.completion_tokens <= 10


def test_a_streamed_legacy_completion_ends_with_its_usage(client):
    chunks = list(client.completions.create(model="gpt-4o-mini", prompt="Hello", stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens >= 1


def test_a_response_has_output_text_and_usage(client):
    reply = client.responses.create(model="gpt-4.1", input="Say hello.",
                                    instructions="Be brief.")
    assert reply.status == "completed" and reply.output_text
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0


def test_a_streamed_response_runs_from_created_to_completed_with_usage(client):
    events = list(client.responses.create(model="gpt-4.1", input="Say hello.", stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == events[-1].response.output_text
    assert events[-1].response.usage.output_tokens >= 1
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_a_response_calls_the_tool_it_is_given(client):
    tool = {"type": "function", "name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}
    reply = client.responses.create(model="gpt-4.1", input="Look it up.", tools=[tool],
                                    tool_choice="required")
    call = reply.output[0]
    assert call.type == "function_call" and call.name == "lookup"


def test_faults_apply_to_these_apis_too(sim, client):
    sim.set_fault("text-embedding-3-small", "rate_limit", retry_after_s=1)
    with pytest.raises(openai.RateLimitError):
        client.embeddings.create(model="text-embedding-3-small", input="x")
    sim.set_fault("gpt-4.1", "error_503")
    with pytest.raises(openai.InternalServerError):
        client.responses.create(model="gpt-4.1", input="x")
    assert sim.stats()["requests"]["gpt-4.1"] == 1

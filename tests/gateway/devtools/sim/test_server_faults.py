"""Each fault knob of the running simulator does what it says, seen by real clients."""

import json
import time

import httpx
import openai
import pytest

HELLO = [{"role": "user", "content": "hello"}]
BODY = {"model": "deepseek-chat", "messages": HELLO}
STREAM_BODY = {**BODY, "stream": True, "stream_options": {"include_usage": True}}


@pytest.fixture
def url(sim):
    return sim.provider_url("deepseek") + "/chat/completions"


@pytest.fixture
def client(sim):
    return openai.OpenAI(base_url=sim.provider_url("deepseek"), api_key="k", max_retries=0,
                         timeout=10)


def wait_for(predicate, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_rate_limit_is_a_429_with_retry_after(sim, url, client):
    sim.set_fault("deepseek-chat", "rate_limit", retry_after_s=7)
    response = httpx.post(url, json=BODY)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert response.headers["retry-after-ms"] == "7000"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="deepseek-chat", messages=HELLO)


@pytest.mark.parametrize(("kind", "status"), [
    ("error_500", 500), ("error_502", 502), ("error_503", 503), ("bad_request", 400)])
def test_error_kinds_answer_their_status_in_openai_shape(sim, url, kind, status):
    sim.set_fault("deepseek-chat", kind)
    response = httpx.post(url, json=BODY)
    assert response.status_code == status
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert sim.stats()["faults"] == {f"deepseek-chat:{kind}": 1}


def test_sdk_sees_server_errors_and_bad_requests_as_its_own_exceptions(sim, client):
    sim.set_fault("deepseek-chat", "error_503")
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="deepseek-chat", messages=HELLO)
    sim.clear_faults("deepseek-chat")
    sim.set_fault("deepseek-chat", "bad_request")
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="deepseek-chat", messages=HELLO)


def test_faults_hit_only_their_model(sim, client):
    sim.set_fault("deepseek-chat", "error_500")
    other = openai.OpenAI(base_url=sim.provider_url("openai"), api_key="k", max_retries=0)
    assert other.chat.completions.create(model="gpt-4.1", messages=HELLO).choices


def test_probability_and_count_bound_how_often_a_fault_fires(sim, url):
    sim.set_fault("deepseek-chat", "error_502", probability=1.0, count=3)
    statuses = [httpx.post(url, json=BODY).status_code for _ in range(5)]
    assert statuses == [502, 502, 502, 200, 200]
    sim.clear_faults()
    sim.set_fault("deepseek-chat", "error_500", probability=0.0)
    assert {httpx.post(url, json=BODY).status_code for _ in range(5)} == {200}


def test_hang_outlasts_the_client_timeout_and_stops_when_the_client_leaves(sim, url, client):
    sim.set_fault("deepseek-chat", "hang", hang_s=300)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url, json=BODY, timeout=0.3)
    # the sim noticed the disconnect: nothing of that request is still running
    assert wait_for(lambda: sim.stats()["in_flight"] == 0)
    quick = openai.OpenAI(base_url=sim.provider_url("deepseek"), api_key="k", max_retries=0,
                          timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        quick.chat.completions.create(model="deepseek-chat", messages=HELLO)


def test_a_short_hang_answers_normally_afterwards(sim, url):
    sim.set_fault("deepseek-chat", "hang", hang_s=0.3)
    started = time.monotonic()
    response = httpx.post(url, json=BODY, timeout=5)
    assert response.status_code == 200
    assert time.monotonic() - started >= 0.3


def test_reset_drops_the_connection_without_a_response(sim, url, client):
    sim.set_fault("deepseek-chat", "reset")
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        httpx.post(url, json=BODY)
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="deepseek-chat", messages=HELLO)
    with (pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)),
          httpx.stream("POST", url, json=STREAM_BODY) as response):
        response.read()


def test_malformed_is_a_200_whose_body_is_not_json(sim, url, client):
    sim.set_fault("deepseek-chat", "malformed")
    response = httpx.post(url, json=BODY)
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        response.json()
    with pytest.raises(json.JSONDecodeError):  # what the SDK makes of a broken body
        client.chat.completions.create(model="deepseek-chat", messages=HELLO)


def test_malformed_stream_carries_a_broken_chunk(sim, url):
    sim.set_fault("deepseek-chat", "malformed")
    with httpx.stream("POST", url, json=STREAM_BODY) as response:
        events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    broken = []
    for event in events[:-1]:
        try:
            json.loads(event)
        except json.JSONDecodeError:
            broken.append(event)
    assert len(broken) == 1


def test_no_usage_leaves_usage_out_of_bodies_and_streams(sim, url, client):
    sim.set_fault("deepseek-chat", "no_usage")
    body = httpx.post(url, json=BODY).json()
    assert body["choices"] and "usage" not in body
    chunks = list(client.chat.completions.create(
        model="deepseek-chat", messages=HELLO, stream=True,
        stream_options={"include_usage": True}))
    assert chunks[-1].choices  # no final usage-only chunk
    assert all(c.usage is None for c in chunks)


def test_mid_stream_reset_cuts_a_stream_after_some_chunks(sim, url):
    sim.set_fault("deepseek-chat", "mid_stream_reset")
    sim.set_behaviour("deepseek-chat", completion_tokens=[20, 20])
    received = []
    with (pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)),
          httpx.stream("POST", url, json=STREAM_BODY) as response):
        received.extend(line for line in response.iter_lines() if line)
    assert 1 <= len(received) < 20
    assert "[DONE]" not in "".join(received)
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        httpx.post(url, json=BODY)
    assert wait_for(lambda: sim.stats()["streams_open"] == 0)


def test_a_client_leaving_mid_stream_closes_the_sims_stream(sim, url):
    sim.set_behaviour("deepseek-chat", ttft_ms=0, per_token_ms=100, completion_tokens=[300, 300])
    with httpx.Client() as http, http.stream("POST", url, json=STREAM_BODY) as response:
        lines = response.iter_lines()
        next(lines)
        assert sim.stats()["streams_open"] == 1
    # closing the client closed its connection; the 30 s stream stops at once
    assert wait_for(lambda: sim.stats()["streams_open"] == 0, timeout_s=3)


def test_faults_can_be_listed_and_set_for_every_model(sim, url):
    sim.set_fault("*", "error_503", probability=1.0)
    assert httpx.post(url, json=BODY).status_code == 503
    listed = httpx.get(sim.base_url + "/_sim/faults").json()["faults"]
    assert listed == [{"model": "*", "kind": "error_503", "probability": 1.0, "count": None,
                       "retry_after_s": 1.0, "hang_s": 300.0, "fired": 1}]
    sim.clear_faults()
    assert httpx.post(url, json=BODY).status_code == 200


def test_invalid_fault_settings_are_refused(sim):
    with pytest.raises(ValueError, match="kind"):
        sim.set_fault("deepseek-chat", "explode")
    with pytest.raises(ValueError, match="probability"):
        sim.set_fault("deepseek-chat", "error_500", probability=2)

import hashlib
import json

from gateway.devtools.sim.stats import SimStats, bearer_fingerprint


def test_bearer_fingerprint_is_a_short_hash_and_only_for_bearer_tokens():
    assert bearer_fingerprint("Bearer sk-abc") == hashlib.sha256(b"sk-abc").hexdigest()[:12]
    assert bearer_fingerprint("bearer sk-abc") == bearer_fingerprint("Bearer sk-abc")
    assert bearer_fingerprint("Basic dXNlcjpwYXNz") is None
    assert bearer_fingerprint("Bearer ") is None
    assert bearer_fingerprint(None) is None


def test_recorded_requests_keep_scalars_and_names_never_the_key():
    stats = SimStats()
    body = {"model": "m", "messages": [{"role": "user", "content": "secret prompt"}],
            "temperature": 0.2, "tools": [{"type": "function"}], "stream": True}
    stats.record_request("m", body, "openai", ["authorization", "x-trace"], "Bearer sk-key")
    (seen,) = stats.recent
    assert seen["params"] == {"model": "m", "temperature": 0.2, "tools": "<list>",
                              "stream": True}
    snapshot = stats.snapshot(connections_open=3)
    assert snapshot["requests"] == {"m": 1} and snapshot["streams"] == {"m": 1}
    assert snapshot["with_bearer"] == {"m": 1} and snapshot["connections_open"] == 3
    dumped = json.dumps([snapshot, list(stats.recent)])
    assert "sk-key" not in dumped and "secret prompt" not in dumped


def test_reset_zeroes_counters_but_not_what_is_open_now():
    stats = SimStats()
    stats.record_request("m", {}, None, [], None)
    stats.streams_open = 2
    stats.reset()
    assert stats.snapshot(None)["total"] == 0
    assert stats.streams_open == 2

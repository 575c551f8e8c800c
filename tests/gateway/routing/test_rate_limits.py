"""Per-replica rpm/tpm caps count a sliding minute and say when room comes back."""

from __future__ import annotations

from gateway.domain.routing_settings import ModelCaps
from gateway.routing.rate_limits import RateLimiter


class FakeClock:
    def __init__(self, t: float = 5000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_requests_up_to_the_rpm_cap_are_allowed_then_refused() -> None:
    clock = FakeClock()
    rl = RateLimiter({"m": ModelCaps(rpm=3)}, clock=clock)
    for _ in range(3):
        assert rl.wait_time("m") == 0
        rl.record_request("m")
    assert rl.wait_time("m") > 0
    assert rl.at_cap() == {"m": rl.wait_time("m")}


def test_room_returns_when_the_oldest_requests_leave_the_minute() -> None:
    clock = FakeClock(5000.0)
    rl = RateLimiter({"m": ModelCaps(rpm=2)}, clock=clock)
    rl.record_request("m")
    clock.t = 5020.5
    rl.record_request("m")
    clock.t = 5030.0
    # the first request (second 5000) leaves the window at 5060
    assert rl.wait_time("m") == 30.0
    clock.t = 5059.9
    assert rl.wait_time("m") > 0
    clock.t = 5060.0
    assert rl.wait_time("m") == 0


def test_tokens_per_minute_cap_counts_reported_tokens() -> None:
    clock = FakeClock()
    rl = RateLimiter({"m": ModelCaps(tpm=1000)}, clock=clock)
    rl.record_tokens("m", 600)
    assert rl.wait_time("m") == 0
    rl.record_tokens("m", 400)
    assert rl.wait_time("m") == 60.0
    assert rl.usage("m") == (0, 1000)


def test_a_cluster_cap_is_split_across_replicas() -> None:
    clock = FakeClock()
    rl = RateLimiter({"m": ModelCaps(rpm=10)}, replicas=4, clock=clock)
    for _ in range(3):  # ceil(10 / 4)
        assert rl.wait_time("m") == 0
        rl.record_request("m")
    assert rl.wait_time("m") > 0


def test_models_without_caps_are_never_limited() -> None:
    rl = RateLimiter({}, clock=FakeClock())
    for _ in range(10_000):
        rl.record_request("free")
    assert rl.wait_time("free") == 0 and rl.at_cap() == {}


def test_new_caps_apply_live_and_keep_the_counts() -> None:
    clock = FakeClock()
    rl = RateLimiter({"m": ModelCaps(rpm=100)}, clock=clock)
    for _ in range(5):
        rl.record_request("m")
    assert rl.wait_time("m") == 0
    rl.update_caps({"m": ModelCaps(rpm=5)})
    assert rl.wait_time("m") > 0

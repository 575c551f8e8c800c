"""Rate limits as token buckets: a burst of the limit, then the limit per minute; a shared
bucket's slice is spent locally and synced, a local one refills by itself."""

from __future__ import annotations

import pytest

from gateway.domain.routing_settings import ModelCaps
from gateway.routing.rate_limits import BucketSlice, RateLimiter


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
    assert rl.wait_time("m") == pytest.approx(20.0)  # one unit refills in 60 / 3 s
    assert rl.at_cap() == {"m": rl.wait_time("m")}


def test_room_returns_as_the_bucket_refills() -> None:
    clock = FakeClock()
    rl = RateLimiter({"m": ModelCaps(rpm=2)}, clock=clock)
    rl.record_request("m")
    rl.record_request("m")
    clock.t += 29.9
    assert rl.wait_time("m") > 0
    clock.t += 0.1
    assert rl.wait_time("m") == 0


def test_tokens_reserved_at_admission_are_settled_to_what_was_used() -> None:
    clock = FakeClock()
    rl = RateLimiter({"m": ModelCaps(tpm=1000)}, clock=clock)
    rl.record_request("m", tokens=900)  # prompt plus the largest output
    rl.record_request("m", tokens=100)
    assert rl.wait_time("m") > 0
    rl.settle_tokens("m", reserved=900, used=300)
    assert rl.wait_time("m") == 0


def test_a_local_cap_is_split_across_replicas_a_shared_one_is_not() -> None:
    clock = FakeClock()
    rl = RateLimiter({"m": ModelCaps(rpm=10)}, replicas=4, clock=clock)
    for _ in range(3):  # ceil(10 / 4)
        assert rl.wait_time("m") == 0
        rl.record_request("m")
    assert rl.wait_time("m") > 0
    shared = RateLimiter({"m": ModelCaps(rpm=10)}, replicas=4, clock=clock, shared=True)
    assert [s.capacity for s in shared.slices()] == [10]


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


def test_a_shared_slice_starts_empty_and_spends_only_what_a_sync_granted() -> None:
    clock = FakeClock()
    s = BucketSlice("key:k:rpm", 20, clock=clock, shared=True)
    assert not s.try_take(1)
    assert s.wait_s() == 0  # the shared bucket may still have it: a sync can bring it
    give_back, want = s.begin_sync()
    assert give_back == 0 and want == 0
    s.wanted = 3
    _, want = s.begin_sync()
    assert want == 3
    s.end_sync(granted=3, level=0)
    assert [s.try_take(1) for _ in range(4)] == [True, True, True, False]
    assert s.wait_s() == pytest.approx(3.0)  # empty everywhere: one unit per 3 s


def test_a_shared_slice_puts_back_what_it_will_not_need_and_pays_its_debts() -> None:
    clock = FakeClock()
    s = BucketSlice("b", 100, clock=clock, shared=True)
    s.end_sync(granted=50, level=50)
    s.try_take(4)
    give_back, want = s.begin_sync()  # used 4: keeps 2 x the smoothed use (2) = 4
    assert (give_back, want) == (42, 0)
    assert s.balance == 4
    s.force_take(10)
    give_back, _ = s.begin_sync()
    assert give_back == -6 and s.balance == 0  # a debt goes back as a negative
    s.abort_sync(give_back)
    assert s.balance == -6


def test_units_a_sync_brought_its_waiters_are_not_put_back_before_they_take_them() -> None:
    clock = FakeClock()
    s = BucketSlice("key:k:rpm", 20, clock=clock, shared=True)
    s.wanted = 3  # three requests wait
    _, want = s.begin_sync()
    s.end_sync(granted=want, level=17)
    # a newcomer's shortage starts the next sync before the three woke up
    s.wanted = 1
    give_back, want = s.begin_sync()
    assert (give_back, want) == (0, 1) and s.balance == 3
    assert [s.try_take(1) for _ in range(3)] == [True, True, True]  # the three wake
    s.end_sync(granted=1, level=16)
    assert s.try_take(1) and not s.try_take(1)  # and the newcomer


def test_promised_units_nobody_took_go_back_a_sync_later() -> None:
    clock = FakeClock()
    s = BucketSlice("key:k:rpm", 20, clock=clock, shared=True)
    s.wanted = 2
    _, want = s.begin_sync()
    s.end_sync(granted=want, level=18)
    assert s.begin_sync() == (0, 0)  # kept for the waiters, one sync
    s.end_sync(granted=0, level=18)
    assert s.begin_sync() == (2, 0) and s.balance == 0  # they gave up: back to the store


def test_remaining_and_reset_describe_the_whole_bucket() -> None:
    clock = FakeClock()
    s = BucketSlice("b", 60, clock=clock, shared=True)
    s.end_sync(granted=10, level=20)
    assert s.remaining() == 30
    assert s.reset_s() == pytest.approx(30.0)

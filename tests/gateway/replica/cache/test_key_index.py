"""The shared cache's key index, on a clock of its own."""

from __future__ import annotations

from gateway.replica.cache.key_index import BUCKET_S, KeyIndex


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def key(tail: str) -> str:
    """A key as the gate makes them (a SHA-256 in hex) ending in `tail`."""
    return "cg1:" + tail.rjust(64, "0")


def tail(end: str) -> str:
    """The tail a store announces of that key."""
    return key(end)[-16:]


def said(**seconds_left: int) -> str:
    """A store's announcement of these keys."""
    return ",".join(f"{tail(end)}:{left}" for end, left in seconds_left.items())


def _index(max_keys: int = 100) -> tuple[KeyIndex, Clock]:
    clock = Clock()
    return KeyIndex(max_keys, clock), clock


def test_before_it_is_loaded_every_key_may_be_held_then_only_the_loaded_and_heard() -> None:
    index, _ = _index()
    assert index.may_hold(key("aaaa")) and not index.ready
    index.load([(tail("aaaa"), 60.0)])
    assert index.ready
    assert index.may_hold(key("aaaa"))
    assert not index.may_hold(key("bbbb"))
    index.learn(said(bbbb=300, cccc=5))
    assert index.may_hold(key("bbbb")) and index.may_hold(key("cccc"))
    assert index.learned == 3  # one loaded, two heard
    index.add(key("dddd"), 60)
    assert index.may_hold(key("dddd"))


def test_a_key_is_forgotten_only_after_it_expired() -> None:
    index, clock = _index()
    index.load([])
    index.learn(said(aaaa=10))
    clock.now += 9.9
    assert index.may_hold(key("aaaa"))
    clock.now += BUCKET_S + 0.2  # past its expiry and its bucket's end
    assert not index.may_hold(key("aaaa"))
    assert len(index) == 0


def test_a_longer_store_of_the_same_key_keeps_it_longer() -> None:
    index, clock = _index()
    index.load([])
    index.learn(said(aaaa=10))
    index.learn(said(aaaa=200))
    clock.now += 100
    assert index.may_hold(key("aaaa"))


def test_keys_dropped_for_room_make_it_untrusted_until_they_could_have_expired() -> None:
    index, clock = _index(max_keys=2)
    index.load([(tail("aaaa"), 60.0), (tail("bbbb"), 60.0)])
    index.learn(said(cccc=120))  # no room: the table may hold it, so every lookup asks
    assert not index.ready and index.may_hold(key("zzzz"))
    clock.now += 120 + BUCKET_S + 1
    assert index.ready and not index.may_hold(key("cccc"))


def test_a_listener_lost_makes_it_ask_the_table_until_loaded_again() -> None:
    index, _ = _index()
    index.load([(tail("aaaa"), 60.0)])
    index.clear()
    assert not index.ready and index.may_hold(key("zzzz"))
    index.load([(tail("zzzz"), 60.0)])
    assert index.may_hold(key("zzzz")) and not index.may_hold(key("aaaa"))


def test_a_payload_not_of_ours_is_ignored() -> None:
    index, _ = _index()
    index.load([])
    index.learn("garbage,:x,aaaa:")
    assert index.learned == 0 and len(index) == 0


def test_more_live_keys_than_fit_make_it_ask_the_table_until_the_last_could_be_gone() -> None:
    index, clock = _index(max_keys=2)
    # the table held three; the third, not loaded, lives 100 s
    index.load([(tail("aaaa"), 60.0), (tail("bbbb"), 60.0)], beyond_s=100.0)
    assert not index.ready and index.may_hold(key("cccc"))
    clock.now += 100 + 1
    assert index.ready and not index.may_hold(key("cccc"))

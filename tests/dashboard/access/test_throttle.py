"""Failed sign-ins lock a name (and an address) out, for longer each time."""

from __future__ import annotations

from dashboard.access.throttle import SignInThrottle, address_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_ten_wrong_passwords_lock_the_name_out_for_longer_each_time():
    clock = Clock()
    throttle = SignInThrottle(clock=clock)
    waits = []
    for _ in range(10):
        if throttle.wait_s("alice", "203.0.113.5") > 0:
            # locked: the attempt is refused before its password is checked; wait it out
            clock.now += throttle.wait_s("alice", "203.0.113.5")
        throttle.failed("alice", "203.0.113.5")
        waits.append(throttle.wait_s("alice", "203.0.113.5"))
    assert waits[:4] == [0.0] * 4
    assert waits[4:] == [30.0, 60.0, 120.0, 240.0, 480.0, 900.0]  # capped at 15 minutes
    # another name from another address is not affected
    assert throttle.wait_s("bob", "198.51.100.7") == 0


def test_a_success_forgets_the_names_failures_but_not_the_addresses():
    clock = Clock()
    throttle = SignInThrottle(user_free=3, address_free=5, clock=clock)
    for name in ("a", "b", "c", "d"):
        throttle.failed(name, "203.0.113.5")
    throttle.succeeded("d", "203.0.113.5")
    assert throttle.wait_s("e", "203.0.113.5") == 0
    throttle.failed("e", "203.0.113.5")  # the address's fifth failure, over five names
    assert throttle.wait_s("f", "203.0.113.5") == 30.0
    assert throttle.wait_s("f", "198.51.100.7") == 0


def test_failures_are_forgotten_after_a_quiet_hour():
    clock = Clock()
    throttle = SignInThrottle(clock=clock)
    for _ in range(4):
        throttle.failed("alice", "local")
    clock.now += 3601
    throttle.failed("alice", "local")
    assert throttle.wait_s("alice", "local") == 0  # a first failure again, not a fifth


def test_flooding_with_invented_names_does_not_lift_a_lockout():
    clock = Clock()
    throttle = SignInThrottle(clock=clock, max_entries=50)
    for _ in range(5):
        throttle.failed("alice", "203.0.113.5")
    for i in range(200):
        throttle.failed(f"made-up-{i}", f"198.51.100.{i % 250}")
    assert throttle.wait_s("alice", "192.0.2.1") == 30.0


def test_addresses_are_keyed_by_host_and_by_ipv6_64():
    assert address_key(None) == "local"
    assert address_key("::ffff:203.0.113.5") == "203.0.113.5"
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9")
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")

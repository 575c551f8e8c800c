"""Failed sign-ins lock a name (and an address) out, for longer each time."""

from __future__ import annotations

import pytest

from dashboard.access.throttle import (
    SignInThrottle,
    address_key,
    client_address,
    trusted_networks,
)


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
    assert throttle.wait_s("alice", "203.0.113.5") == 30.0


def test_addresses_are_keyed_by_host_and_by_ipv6_64():
    assert address_key(None) == "local"
    assert address_key("::ffff:203.0.113.5") == "203.0.113.5"
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9")
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")


def test_one_clients_failures_never_lock_out_another_client_nor_its_names():
    throttle = SignInThrottle(clock=Clock())
    for i in range(21):  # a name's own lock and then the address's, from one client
        throttle.failed("olga" if i % 2 else f"guess-{i}", "203.0.113.5")
    assert throttle.wait_s("olga", "203.0.113.5") > 0
    assert throttle.wait_s("someone", "203.0.113.5") > 0  # past the address's 20
    # the same name from another client, and another name, sign in at once
    assert throttle.wait_s("olga", "198.51.100.7") == 0
    assert throttle.wait_s("vic", "198.51.100.7") == 0


TRUSTED = trusted_networks("10.0.0.0/8, 127.0.0.1")


@pytest.mark.parametrize("peer, forwarded, client", [
    # a trusted ingress: the address it saw, not its own
    ("10.1.2.3", "203.0.113.5", "203.0.113.5"),
    # what the client itself put first is skipped: the last address no trusted proxy added
    ("10.1.2.3", "1.1.1.1, 203.0.113.5, 10.9.9.9", "203.0.113.5"),
    # a peer that is no trusted proxy is the client, whatever it claims
    ("198.51.100.7", "203.0.113.5", "198.51.100.7"),
    ("10.1.2.3", None, "10.1.2.3"),
    ("::ffff:127.0.0.1", "192.0.2.4", "192.0.2.4"),
])
def test_the_client_is_the_address_behind_the_trusted_proxies(peer, forwarded, client):
    assert client_address(peer, forwarded, TRUSTED) == client


def test_no_trusted_proxy_by_default_and_a_bad_entry_is_named():
    assert client_address("10.1.2.3", "203.0.113.5", trusted_networks("")) == "10.1.2.3"
    with pytest.raises(ValueError, match="not-an-ip"):
        trusted_networks("10.0.0.0/8,not-an-ip")

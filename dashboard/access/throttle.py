"""Failed sign-ins slow the next ones down, per name from a client, and per client.

After `free` failures in a row, every further failure locks that name from that client
address (or, past more failures, that address for every name) for `base_s` seconds,
doubling each time up to `max_s`; while locked, a sign-in is refused before its password
is even checked, so guessing gains nothing from trying faster. A success forgets the
name's failures from that address but not the address's (one valid account must not
reset a guesser's count against the others), and failures are forgotten after
`forget_s` without one. Nothing a client does locks out a name on another client, or
another client: the lock is never the name's alone.

The client address is the connection's, or, when the connection comes from a proxy
named in COSTGATE_DASHBOARD_TRUSTED_PROXIES, the last address in X-Forwarded-For that no
trusted proxy added (`client_address`): behind an ingress every connection is the
ingress's, and keying on it would let one guesser lock out everyone. Addresses allow more
failures than a name from one, because people behind one NAT share one. An IPv6 client
counts by its /64, which one host can fill with addresses.

The state lives in this process: each dashboard replica throttles on its own, so with N
replicas behind a balancer a guesser gets up to N times the attempts. That is the
documented limit (docs/dashboard.md); the hashes' cost bounds what it buys.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import threading
import time
from collections.abc import Callable

USER_FREE_FAILURES = 5
ADDRESS_FREE_FAILURES = 20
BASE_LOCKOUT_S = 30.0
MAX_LOCKOUT_S = 900.0
FORGET_AFTER_S = 3600.0
MAX_ENTRIES = 10_000  # memory bound: a guesser inventing names cannot grow this forever


@dataclasses.dataclass
class _Failures:
    count: int = 0
    last_at: float = 0.0
    locked_until: float = 0.0


Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


def trusted_networks(text: str) -> Networks:
    """COSTGATE_DASHBOARD_TRUSTED_PROXIES: addresses or CIDRs, comma-separated (a bad one
    raises ValueError naming it)."""
    found = []
    for part in (p.strip() for p in text.split(",")):
        if part:
            try:
                found.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ValueError(f"not an address or CIDR: {part[:60]!r}") from None
    return tuple(found)


def _trusted(ip: str, trusted: Networks) -> bool:
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr in net for net in trusted)


def client_address(peer: str | None, forwarded_for: str | None, trusted: Networks) -> str | None:
    """The client behind the trusted proxies: walking X-Forwarded-For from the right, the
    first address a trusted proxy did not add. A peer that is not a trusted proxy is the
    client itself, whatever header it sends. No address (a local connection, or a test
    harness that has none) is None."""
    if not isinstance(peer, str) or not peer:
        return None
    if not _trusted(peer, trusted) or not isinstance(forwarded_for, str):
        return peer
    hops = [h.strip() for h in forwarded_for[:2048].split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer


def address_key(ip: str | None) -> str:
    """The throttle's key for a client address (None: a local connection)."""
    if not ip:
        return "local"
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{addr}/64", strict=False))
    return str(addr)


class SignInThrottle:
    def __init__(
        self,
        user_free: int = USER_FREE_FAILURES,
        address_free: int = ADDRESS_FREE_FAILURES,
        base_s: float = BASE_LOCKOUT_S,
        max_s: float = MAX_LOCKOUT_S,
        forget_s: float = FORGET_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self._free = {"user": user_free, "address": address_free}
        self._base_s, self._max_s, self._forget_s = base_s, max_s, forget_s
        self._clock = clock
        self._max_entries = max_entries
        self._failures: dict[tuple[str, str], _Failures] = {}
        self._lock = threading.Lock()  # Streamlit sessions run in threads

    def _keys(self, name: str, address: str) -> list[tuple[str, str]]:
        # the name from this address: a guesser elsewhere never locks its owner out
        return [("user", f"{address}|{name.strip()}"), ("address", address)]

    def _current(self, key: tuple[str, str], now: float) -> _Failures | None:
        entry = self._failures.get(key)
        if entry is not None and now - entry.last_at > self._forget_s and now >= entry.locked_until:
            del self._failures[key]
            return None
        return entry

    def wait_s(self, name: str, address: str) -> float:
        """Seconds until `name` may try again from `address`; 0 means now."""
        now = self._clock()
        with self._lock:
            waits = [
                entry.locked_until - now
                for key in self._keys(name, address)
                if (entry := self._current(key, now)) is not None
            ]
        return max([0.0, *waits])

    def failed(self, name: str, address: str) -> None:
        now = self._clock()
        with self._lock:
            for key in self._keys(name, address):
                entry = self._current(key, now)
                if entry is None:
                    if len(self._failures) >= self._max_entries and not self._make_room(now):
                        continue  # full of live lockouts: those stay, this one goes uncounted
                    entry = self._failures.setdefault(key, _Failures())
                entry.count += 1
                entry.last_at = now
                over = entry.count - self._free[key[0]]
                if over >= 0:
                    lockout = min(self._max_s, self._base_s * 2**over)
                    entry.locked_until = max(entry.locked_until, now + lockout)

    def succeeded(self, name: str, address: str) -> None:
        with self._lock:
            self._failures.pop(self._keys(name, address)[0], None)

    def _make_room(self, now: float) -> bool:
        """Forget idle entries, else the oldest unlocked ones; False if all are locked."""
        for key in list(self._failures):
            self._current(key, now)
        if len(self._failures) < self._max_entries:
            return True
        # never a live lockout: flooding the table with invented names must not lift one
        unlocked = sorted(
            (k for k, e in self._failures.items() if e.locked_until <= now),
            key=lambda k: self._failures[k].last_at,
        )
        for key in unlocked[: max(1, len(unlocked) // 2)]:
            del self._failures[key]
        return len(self._failures) < self._max_entries

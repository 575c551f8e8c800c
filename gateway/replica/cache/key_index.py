"""Which keys the shared table may hold, so that a miss costs this replica no round trip.

Every store announces its keys (`NOTIFY`, in the INSERT's own statement, so only what
committed); each replica listens, loads the live keys once when it starts listening, and
keeps a fingerprint of each until its entry expires. A key it has no fingerprint of is a
miss without asking the table. A fingerprint is 64 bits of the key's tail: two keys that
share one cost a lookup that misses, never a wrong answer.

It is trusted only while the listener is connected and loaded (`ready`), and not while it
has dropped keys for room (`MAX_KEYS`): then every lookup asks the table, as without it.
A store is seen by the other replicas about a millisecond after it commits; the store
itself already follows the answer by up to `STORE_WINDOW_S`, so a repeat sent at once
could miss before too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

# ~80 bytes of a replica's memory a key: 40 MB at most, then the table is asked again
MAX_KEYS = 500_000
BUCKET_S = 30.0  # expired fingerprints are dropped a bucket at a time, not one by one
FINGERPRINT_CHARS = 16


def fingerprint(key: str) -> int:
    # Python's str hash: the same within this process, which is all the index needs
    return hash(key[-FINGERPRINT_CHARS:])


class KeyIndex:
    def __init__(self, max_keys: int = MAX_KEYS,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.max_keys, self._clock = max_keys, clock
        self._expiry: dict[int, int] = {}  # fingerprint -> the bucket it expires in
        self._buckets: dict[int, list[int]] = {}
        self._listening = False  # loaded and hearing every store
        self._dropped_until = 0.0  # keys dropped for room may be in the table until then
        self._oldest = self._bucket(0.0)
        self.learned = 0  # fingerprints heard from any replica's store, or loaded

    def _bucket(self, ttl_s: float) -> int:
        return math.ceil((self._clock() + ttl_s) / BUCKET_S)

    @property
    def ready(self) -> bool:
        return self._listening and self._clock() >= self._dropped_until

    def may_hold(self, key: str) -> bool:
        if not self.ready:
            return True
        self._drop_expired()
        return fingerprint(key) in self._expiry

    def add(self, key: str, ttl_s: float) -> None:
        self._add(fingerprint(key), ttl_s)

    def _add(self, fp: int, ttl_s: float) -> None:
        bucket = self._bucket(ttl_s)
        if self._expiry.get(fp, -1) >= bucket:
            return
        if len(self._expiry) >= self.max_keys:
            self._drop_expired()
            if len(self._expiry) >= self.max_keys:
                # dropped for room: the table may hold it until it expires, so ask it
                self._dropped_until = max(self._dropped_until, self._clock() + ttl_s)
                return
        self._expiry[fp] = bucket
        self._buckets.setdefault(bucket, []).append(fp)

    def learn(self, payload: str) -> None:
        """A store's announcement: `tail:seconds_left` per key, comma-separated."""
        for item in payload.split(","):
            tail, _, left = item.partition(":")
            try:
                ttl = float(left)
            except ValueError:
                continue  # not ours; nothing else writes the channel
            self.learned += 1
            self._add(hash(tail), ttl)

    def load(self, live: Iterable[tuple[str, float]], beyond_s: float | None = None) -> None:
        """The table's live keys, read after LISTEN: from here on it is trusted.
        `beyond_s`: the table held more than fit, the last of them live this long; until
        then a key it does not hold may still be there."""
        self.clear()
        for tail, left in live:
            self.learned += 1
            self._add(hash(tail), left)
        if beyond_s is not None:
            self._dropped_until = max(self._dropped_until, self._clock() + beyond_s)
        self._listening = True

    def clear(self) -> None:
        """The listener is gone: a store may go unheard, so ask the table until reloaded."""
        self._expiry.clear()
        self._buckets.clear()
        self._listening = False

    def _drop_expired(self) -> None:
        now = math.floor(self._clock() / BUCKET_S)
        while self._oldest <= now:
            for fp in self._buckets.pop(self._oldest, ()):
                if self._expiry.get(fp) == self._oldest:
                    del self._expiry[fp]
            self._oldest += 1

    def __len__(self) -> int:
        return len(self._expiry)

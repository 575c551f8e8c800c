"""How an end user's id is stored: as sent, or as an HMAC of it (pure).

With `ledger.end_user_hash: hmac` the ledger holds `hmac:` + HMAC-SHA256(secret, id) in
hex: the same customer still groups together (and a budget per end user still applies),
but the id itself never reaches the database; the secret lives only in the environment
variable the config names. An erased end user's rows carry a tombstone instead, one per
erasure, so they still group together without saying whose they were.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid

HASH_PREFIX = "hmac:"
TOMBSTONE_PREFIX = "forgotten:"


def hashed(end_user: str, secret: bytes) -> str:
    digest = hmac.new(secret, end_user.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return HASH_PREFIX + digest.hexdigest()


def tombstone() -> str:
    return TOMBSTONE_PREFIX + uuid.uuid4().hex


class EndUserIds:
    """The stored form of end-user ids under one configuration."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret

    @property
    def hashing(self) -> bool:
        return self._secret is not None

    def stored(self, end_user: str) -> str:
        return end_user if self._secret is None else hashed(end_user, self._secret)


PLAIN = EndUserIds()

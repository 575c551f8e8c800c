"""Whether one request uses the cache, and how: from its headers and the config. Pure.

`x-costgate-cache: on | off` opts a request in or out; without it, an alias or model
listed in `cache.aliases` / `cache.models` is in. `Cache-Control: no-cache` skips the
lookup (the answer is still stored, unless `no-store`), `no-store` skips storing, and
`max-age=N` is both the oldest entry the request accepts and the TTL of what it stores.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from enum import StrEnum

from gateway.domain.config import CacheOptions
from gateway.domain.openai_errors import OpenAIError

CACHE_HEADER = "x-costgate-cache"
MAX_AGE_S = 2**31
_SECONDS = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit takes "²", int() not


class CacheState(StrEnum):
    HIT = "hit"
    MISS = "miss"
    BYPASS = "bypass"  # opted in, but the request said no-cache
    OFF = "off"


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    state: CacheState  # the response header's value unless the lookup hits
    lookup: bool
    store: bool
    ttl_s: float
    max_age_s: float | None  # the oldest entry accepted (None: any live one)


OFF = Decision(CacheState.OFF, lookup=False, store=False, ttl_s=0.0, max_age_s=None)


def _bad(message: str, header: str) -> OpenAIError:
    return OpenAIError(400, message, param=header, code="invalid_header")


def parse_cache_control(value: str | None) -> tuple[bool, bool, float | None]:
    """(no-cache, no-store, max-age) of a request's Cache-Control."""
    no_cache = no_store = False
    max_age: float | None = None
    for part in (value or "").split(","):
        name, _, arg = part.strip().partition("=")
        name = name.strip().lower()
        if name == "no-cache":
            no_cache = True
        elif name == "no-store":
            no_store = True
        elif name == "max-age":
            arg = arg.strip().strip('"')
            if not _SECONDS.fullmatch(arg):
                raise _bad("Cache-Control max-age must be a whole number of seconds.",
                           "cache-control")
            # RFC 9111: a delta-seconds too large to represent counts as 2^31; beyond it
            # a TTL overflows (a float) or is refused (Redis, failing a whole pipeline)
            digits = arg.lstrip("0") or "0"
            max_age = float(min(int(digits), MAX_AGE_S) if len(digits) <= 11 else MAX_AGE_S)
    return no_cache, no_store, max_age


def decide(headers: Mapping[str, str], opts: CacheOptions, requested: str) -> Decision:
    asked = (headers.get(CACHE_HEADER) or "").strip().lower()
    if asked not in ("", "on", "off"):
        raise _bad(f"{CACHE_HEADER} must be 'on' or 'off'.", CACHE_HEADER)
    listed = requested in opts.aliases or requested in opts.models
    if asked == "off" or (asked == "" and not listed):
        return OFF
    control = headers.get("cache-control")
    if control is None:
        return _plain(opts.ttl_s)  # most requests: one decision per TTL, not one each
    no_cache, no_store, max_age = parse_cache_control(control)
    ttl = opts.ttl_s if max_age is None else max_age
    lookup = not no_cache and max_age != 0
    return Decision(
        CacheState.MISS if lookup else CacheState.BYPASS,
        lookup=lookup,
        store=not no_store and ttl > 0,
        ttl_s=ttl,
        max_age_s=max_age,
    )


@functools.lru_cache(maxsize=16)
def _plain(ttl_s: float) -> Decision:
    """Opted in, no Cache-Control: look up, and store for the configured TTL."""
    return Decision(CacheState.MISS, lookup=True, store=ttl_s > 0, ttl_s=ttl_s, max_age_s=None)

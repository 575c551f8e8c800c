"""Who the demo's live requests are for: end users, sessions and features (pure).

Each app (one key of the traffic) has its own customers, drawn as the seeded history
draws them (gateway.devtools.seed_attribution): Zipf's law over a customer's rank, so
the Customers page shows a few heavy customers and a long tail from the first minute,
plans by rank, and sessions of 1-20 consecutive requests of the app for one customer.
One session in ten is an internal job: no end user, no session, tags only. Every request
carries `feature` (the app's, the first ones used most) and `env`, and a customer's
`plan`.

How each part travels varies as real clients vary (gateway.attribution.inputs reads them
all): the end user in the `x-costgate-user` header or in the body (OpenAI's `user`,
Anthropic's `metadata.user_id`); tags as OpenAI `metadata` on chat
completions and Responses, else in `x-costgate-tags`; the session in
`x-costgate-session`.
"""

from __future__ import annotations

import dataclasses
import itertools
import random

from gateway.devtools.seed_attribution import (
    ENTERPRISE_TOP,
    INTERNAL_SHARE,
    MAX_SESSION,
    PRO_TOP,
    SESSION_P,
    STAGING_SHARE,
    ZIPF_S,
    end_user_id,
)

# the features of the traffic's apps, by key (the demo's: web-chat, support-bot,
# code-assistant), most used first; a fourth key takes the first list again
APP_FEATURES: tuple[tuple[str, ...], ...] = (
    ("chat", "summarize", "translate", "rewrite", "brainstorm", "explain", "email-draft",
     "title-gen"),
    ("reply-draft", "ticket-triage", "summarize", "kb-search", "refund-check", "sentiment",
     "faq-answer", "escalation"),
    ("completion", "chat", "explain", "test-gen", "refactor", "code-review", "bug-fix",
     "commit-message"),
)  # fmt: skip
CUSTOMERS_PER_APP = 300
USER_HEADER_SHARE = 0.3  # of customers' requests: the end user in the header, not the body
# live customers' ids come after any seeded population (seeding numbers from 0)
LIVE_ID_BASE = 10_000_000
# the bodies that carry OpenAI `metadata` (the gateway's tags); others use the header
METADATA_ENDPOINTS = frozenset({"chat.completions", "responses"})


@dataclasses.dataclass(frozen=True)
class Visit:
    """One request's attribution, as the client sends it."""

    end_user: str | None
    session: str | None
    tags: dict[str, str]
    user_in_header: bool = False

    def headers(self, endpoint: str) -> dict[str, str]:
        """The x-costgate headers for a call on `endpoint` (the body carries the rest)."""
        out = {}
        if self.end_user and self.user_in_header:
            out["x-costgate-user"] = self.end_user
        if self.session:
            out["x-costgate-session"] = self.session
        if self.tags and endpoint not in METADATA_ENDPOINTS:
            out["x-costgate-tags"] = ",".join(f"{k}={v}" for k, v in self.tags.items())
        return out

    @property
    def body_user(self) -> str | None:
        """The end user for the body (None when the header carries it)."""
        return None if self.user_in_header else self.end_user


NO_VISIT = Visit(None, None, {})


@dataclasses.dataclass
class _Session:
    end_user: str | None
    session: str | None
    tags: dict[str, str]  # the session's env and plan
    left: int


class Audience:
    """The apps' customers and their sessions: `visit(key)` is the next request's."""

    def __init__(self, rng: random.Random, keys: int, customers: int = CUSTOMERS_PER_APP):
        self._rng = rng
        self._customers = customers
        self._weights = list(itertools.accumulate(1 / r**ZIPF_S for r in range(1, customers + 1)))
        self._open: dict[int, _Session] = {}
        self.end_users: set[str] = set()  # those who made a request so far
        self._session_salt = rng.getrandbits(32)
        self.sessions = 0  # customers' sessions begun
        self.features = [APP_FEATURES[k % len(APP_FEATURES)] for k in range(keys)]
        self._feature_weights = [
            list(itertools.accumulate(1 / r**0.8 for r in range(1, len(f) + 1)))
            for f in self.features
        ]

    def _plan(self, rank: int) -> str:
        if rank < max(1, self._customers * ENTERPRISE_TOP):
            return "enterprise"
        return "pro" if rank < max(1, self._customers * PRO_TOP) else "free"

    def _new_session(self, key: int) -> _Session:
        rng = self._rng
        length = 1
        while length < MAX_SESSION and rng.random() >= SESSION_P:  # geometric, capped
            length += 1
        env = "staging" if rng.random() < STAGING_SHARE else "prod"
        if rng.random() < INTERNAL_SHARE:
            return _Session(None, None, {"env": env}, length)
        rank = rng.choices(range(self._customers), cum_weights=self._weights)[0]
        user = end_user_id(LIVE_ID_BASE + key * self._customers + rank)
        self.sessions += 1
        self.end_users.add(user)
        session = f"sess_{self.sessions:06d}{self._session_salt:08x}"
        return _Session(user, session, {"env": env, "plan": self._plan(rank)}, length)

    def tally(self) -> str:
        """What the traffic's summary line says of it."""
        return f"{len(self.end_users)} end users, {self.sessions} sessions"

    def visit(self, key: int) -> Visit:
        """The next request of app `key`: the open session's, or a new session's first."""
        current = self._open.get(key)
        if current is None or current.left == 0:
            current = self._open[key] = self._new_session(key)
        current.left -= 1
        features = self.features[key]
        feature = self._rng.choices(features, cum_weights=self._feature_weights[key])[0]
        return Visit(
            current.end_user,
            current.session,
            {"feature": feature, **current.tags},
            user_in_header=self._rng.random() < USER_HEADER_SHARE,
        )

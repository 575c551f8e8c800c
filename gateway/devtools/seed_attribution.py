"""Who the seeded requests were for: end users, sessions and tags (`costgate seed`).

Each app serves its own customers, a long-tailed population: a customer's share of the
app's sessions follows Zipf's law over their rank (s = 1), so a few heavy customers
carry a large part of the traffic and most customers make a handful of requests. A
customer's plan follows their rank too (the heaviest are on `enterprise`).

A session is a run of 1-20 consecutive requests of the app (geometric lengths, mean
about 5) for one customer; one run in ten is an internal job instead, with neither an
end user nor a session. Every request carries tags: `feature` (8-12 per app, the first
ones used most), `env` (prod, one session in twenty on staging) and, for a customer,
`plan`: 50 distinct tag values over the six apps.

Everything is drawn in bulk with numpy; the rows get plain Python lists of shared
objects (one string per customer and session, one dict per tag combination), so the
seed's per-row loop only indexes them.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Iterable, Sequence

import numpy as np

# the seeded apps' features, most used first (shared names: the same feature in two apps)
FEATURES: dict[str, tuple[str, ...]] = {
    "support-bot": (
        "reply-draft", "ticket-triage", "summarize", "kb-search", "refund-check",
        "sentiment", "faq-answer", "translate", "escalation", "csat-survey",
    ),
    "search": (
        "answer", "query-rewrite", "rerank", "autocomplete", "summarize", "kb-search",
        "spell-fix", "related-questions",
    ),
    "code-assistant": (
        "completion", "chat", "explain", "test-gen", "refactor", "code-review", "bug-fix",
        "docstring", "commit-message", "sql-gen", "summarize", "translate",
    ),
    "analytics": (
        "sql-gen", "report-summary", "anomaly-explain", "chart-caption", "classify",
        "extract", "forecast-notes", "data-cleaning", "dashboard-qa",
    ),
    "marketing-copy": (
        "ad-copy", "email-draft", "product-description", "headline", "social-post",
        "rewrite", "translate", "seo-meta",
    ),
    "internal-tools": (
        "meeting-notes", "doc-search", "summarize", "email-draft", "hr-faq", "classify",
        "extract", "translate", "expense-check",
    ),
}  # fmt: skip
ENVS = ("prod", "staging")
PLANS = ("free", "pro", "enterprise")
STAGING_SHARE = 0.05
INTERNAL_SHARE = 0.10  # of sessions: internal jobs, with no end user and no session
MAX_SESSION = 20
SESSION_P = 0.2  # geometric lengths: mean about 5 before the cap at MAX_SESSION
ZIPF_S = 1.0  # customers' weights: 1 / rank**s
FEATURE_S = 0.8  # features' weights: 1 / rank**s
# plans by a customer's rank in their app: the top 2% enterprise, the next 18% pro
ENTERPRISE_TOP, PRO_TOP = 0.02, 0.20
DEFAULT_END_USERS = 5_000
_ID_MULT = 0x9E3779B1  # odd: g -> g * _ID_MULT mod 2**32 is a bijection (ids never collide)
_SESSION_MULT = 0x5DEECE66D  # odd, likewise mod 2**48


@dataclasses.dataclass(frozen=True)
class SeedAttribution:
    """Per row (in the rows' order): end user, session id and tags (a shared dict)."""

    end_users: list[str | None]
    sessions: list[str | None]
    tags: list[dict[str, str]]
    distinct_end_users: int
    distinct_tag_values: int


_ID_ADD = 0x5BD1E995
_ID_INVERSE = pow(_ID_MULT, -1, 2**32)
# how far each copy of a sample turns its customers within their rank block (odd, large:
# consecutive copies land far apart)
_COPY_TURN = 0x9E3779B9
HEAD_RANKS = 2**10 - 1  # whole blocks: ranks 0-1,022


def end_user_id(index: int) -> str:
    """Customer `index`'s id: looks random, never collides, the same in every seeding."""
    return f"cust_{(index * _ID_MULT + _ID_ADD) % 2**32:08x}"


def customer_index(user_id: str) -> int:
    """The index `end_user_id` made `user_id` from."""
    return ((int(user_id.removeprefix("cust_"), 16) - _ID_ADD) * _ID_INVERSE) % 2**32


def stand_in_rank(rank: int, n: int, copy: int) -> int:
    """The customer who makes, in copy `copy` of a drawn sample, the requests rank `rank`
    made in it: a rank of the same dyadic block (ranks 2^j - 1 to 2^(j+1) - 2, whose
    Zipf weights differ by at most 2) and the same plan. A sample of a million rows sees
    the head of 100,000 customers and misses most of the tail (39,400 seen, measured);
    turned this way, fifty copies reach the tail as fifty draws would, and a customer's
    plan tag stays their rank's. The first HEAD_RANKS of an app stand for themselves:
    the sample sees each of them (a dozen requests or more at 100,000 customers), so
    the heaviest customers stay who they are. Copy 0 is the sample itself; within a
    copy the turn is a bijection (no two customers merge)."""
    if rank < HEAD_RANKS:
        return rank
    enterprise, pro = (max(1, math.ceil(n * top)) for top in (ENTERPRISE_TOP, PRO_TOP))
    band = (0, enterprise) if rank < enterprise else (enterprise, pro) if rank < pro else (pro, n)
    j = (rank + 1).bit_length() - 1
    lo, hi = max(band[0], (1 << j) - 1), min(band[1], (1 << (j + 1)) - 1)
    return lo + (rank - lo + copy * _COPY_TURN) % (hi - lo)


def copy_stand_ins(users: Iterable[str], sizes: Sequence[int], copy: int) -> list[tuple[str, str]]:
    """(customer, stand-in) for copy `copy` of a sample whose customers are `users`, in
    populations of `sizes` by app (`populations`); customers who stand for themselves
    are left out."""
    starts = np.cumsum([0, *sizes]).tolist()
    out = []
    for user in users:
        index = customer_index(user)
        app = bisect.bisect_right(starts, index) - 1
        if not 0 <= app < len(sizes):
            continue  # not one of these populations' customers
        rank = index - starts[app]
        other = starts[app] + stand_in_rank(rank, sizes[app], copy)
        if other != index:
            out.append((user, end_user_id(other)))
    return out


def populations(end_users: int, shares: Sequence[float]) -> list[int]:
    """`end_users` split over the apps by their share of traffic (largest remainder)."""
    exact = np.asarray(shares, dtype=float) / sum(shares) * end_users
    sizes = np.floor(exact).astype(int)
    left = end_users - int(sizes.sum())
    sizes[np.argsort(sizes - exact)[:left]] += 1  # the largest remainders first
    return [int(s) for s in sizes]


def zipf_ranks(rng: np.random.Generator, n: int, size: int, s: float) -> np.ndarray:
    """`size` ranks in [0, n), rank k drawn with weight 1 / (k + 1)**s."""
    cdf = np.cumsum(1.0 / np.arange(1, n + 1) ** s)
    ranks: np.ndarray = np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right")
    capped: np.ndarray = np.minimum(ranks, n - 1)
    return capped


def plan_of(rank: np.ndarray, n: int) -> np.ndarray:
    """1 free, 2 pro, 3 enterprise, by rank in a population of `n` (0 is no plan)."""
    top = np.maximum(1, np.ceil(n * np.array([ENTERPRISE_TOP, PRO_TOP])))
    return np.where(rank < top[0], 3, np.where(rank < top[1], 2, 1))


def session_lengths(rng: np.random.Generator, rows: int) -> np.ndarray:
    """Run lengths of 1..MAX_SESSION summing to exactly `rows`."""
    parts = [np.empty(0, dtype=np.int64)]
    total = 0
    while total < rows:
        more = np.minimum(rng.geometric(SESSION_P, size=rows // 4 + 16), MAX_SESSION)
        parts.append(more)
        total += int(more.sum())
    lengths = np.concatenate(parts)
    ends = np.cumsum(lengths)
    count = int(np.searchsorted(ends, rows)) + 1 if rows else 0
    lengths = lengths[:count].copy()
    if count:
        lengths[-1] -= int(ends[count - 1]) - rows  # the last run ends with the rows
    return lengths


def _tag_table(features: Sequence[str]) -> list[dict[str, str]]:
    """One dict per (feature, env, plan) combination: code (f * 2 + e) * 4 + p."""
    table = []
    for feature in features:
        for env in ENVS:
            for plan in (None, *PLANS):
                tags = {"feature": feature, "env": env}
                table.append(tags | {"plan": plan} if plan else tags)
    return table


def draw_attribution(
    rng: np.random.Generator,
    app_idx: np.ndarray,
    apps: Sequence[str],
    shares: Sequence[float],
    end_users: int,
) -> SeedAttribution:
    """End users, sessions and tags for rows of the apps `app_idx` names, in time order."""
    rows = len(app_idx)
    user_col = np.full(rows, None, dtype=object)
    session_col = np.full(rows, None, dtype=object)
    tag_col = np.empty(rows, dtype=object)
    sizes = populations(end_users, shares)
    offset = 0
    next_session = 0
    salt = int(rng.integers(2**48))
    seen_users: list[np.ndarray] = []
    tag_values: set[tuple[str, str]] = set()
    for a, app in enumerate(apps):
        at = np.flatnonzero(app_idx == a)
        n, features = sizes[a], FEATURES[app]
        lengths = session_lengths(rng, len(at))
        count = len(lengths)
        internal = rng.random(count) < INTERNAL_SHARE if n else np.ones(count, dtype=bool)
        rank = zipf_ranks(rng, max(n, 1), count, ZIPF_S)
        plan = np.where(internal, 0, plan_of(rank, n))
        env = (rng.random(count) < STAGING_SHARE).astype(np.int64)
        of_row = np.repeat(np.arange(count), lengths)
        weights = 1.0 / np.arange(1, len(features) + 1) ** FEATURE_S
        feature = rng.choice(len(features), size=len(at), p=weights / weights.sum())
        code = (feature * 2 + env[of_row]) * 4 + plan[of_row]
        table = _tag_table(features)
        by_code = np.empty(len(table), dtype=object)
        by_code[:] = table
        tag_col[at] = by_code[code]
        for used in np.unique(code).tolist():
            tag_values.update(table[used].items())
        customer = ~internal
        users = np.full(count, None, dtype=object)
        users[customer] = [end_user_id(offset + r) for r in rank[customer].tolist()]
        sessions = np.full(count, None, dtype=object)
        ids = np.arange(next_session, next_session + count)[customer].tolist()
        sessions[customer] = [f"sess_{(i * _SESSION_MULT + salt) % 2**48:012x}" for i in ids]
        user_col[at], session_col[at] = users[of_row], sessions[of_row]
        seen_users.append(offset + rank[customer])
        offset += n
        next_session += count
    distinct = len(np.unique(np.concatenate(seen_users))) if seen_users else 0
    return SeedAttribution(
        end_users=user_col.tolist(),
        sessions=session_col.tolist(),
        tags=tag_col.tolist(),
        distinct_end_users=distinct,
        distinct_tag_values=len(tag_values),
    )

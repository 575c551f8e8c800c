"""Whose the demo's requests are: customers, sessions and features, and how each travels."""

import random
from collections import Counter

from gateway.attribution.inputs import Sources, read_attribution
from gateway.devtools.traffic_audience import (
    APP_FEATURES,
    CUSTOMERS_PER_APP,
    MAX_SESSION,
    NO_VISIT,
    Audience,
    Visit,
)


def _visits(keys: int = 3, n: int = 6_000, seed: int = 4) -> list[tuple[int, Visit]]:
    rng = random.Random(seed)
    audience = Audience(rng, keys)
    out = []
    for _ in range(n):
        key = rng.randrange(keys)
        out.append((key, audience.visit(key)))
    return out


def test_a_session_is_a_run_of_one_apps_consecutive_requests_for_one_customer():
    visits = _visits()
    runs: dict[str, list[int]] = {}
    by_key: dict[int, list[int]] = {}
    for i, (key, visit) in enumerate(visits):
        by_key.setdefault(key, []).append(i)
        if visit.session:
            runs.setdefault(visit.session, []).append(i)
    lengths = Counter(len(r) for r in runs.values())
    assert min(lengths) == 1 and max(lengths) <= MAX_SESSION and len(lengths) > 10
    for run in runs.values():
        (key,) = {visits[i][0] for i in run}
        assert len({visits[i][1].end_user for i in run}) == 1
        # consecutive among the app's requests
        order = by_key[key]
        start = order.index(run[0])
        assert order[start : start + len(run)] == run


def test_customers_are_long_tailed_and_each_apps_own():
    visits = _visits(n=9_000)
    per_user = Counter(v.end_user for _, v in visits if v.end_user)
    owners = {v.end_user: k for k, v in visits if v.end_user}
    assert all(owners[v.end_user] == k for k, v in visits if v.end_user)
    counts = sorted(per_user.values(), reverse=True)
    assert sum(counts[:5]) > 0.15 * sum(counts)  # a few heavy customers
    assert sorted(counts)[len(counts) // 2] < sum(counts) / len(counts) / 2  # a long tail
    assert len(per_user) <= 3 * CUSTOMERS_PER_APP


def test_every_request_has_a_feature_of_its_app_and_internal_jobs_no_end_user():
    visits = _visits()
    for key, visit in visits:
        assert visit.tags["feature"] in APP_FEATURES[key] and visit.tags["env"]
        assert (visit.end_user is None) == (visit.session is None) == ("plan" not in visit.tags)
    internal = sum(v.end_user is None for _, v in visits) / len(visits)
    assert 0.05 < internal < 0.16
    features = Counter(v.tags["feature"] for k, v in visits if k == 0)
    assert features.most_common(1)[0][0] == APP_FEATURES[0][0]


def test_the_gateway_reads_back_what_each_endpoint_sends():
    """The headers and body fields of a visit, read by the gateway's own attribution."""
    visit = Visit("cust_1", "sess_9", {"feature": "chat", "env": "prod"}, user_in_header=False)
    chat = visit.headers("chat.completions")
    assert chat == {"x-costgate-session": "sess_9"}  # tags travel as `metadata`
    body = {"user": visit.body_user, "metadata": visit.tags}
    got = read_attribution(chat, body, Sources(openai_user=True, openai_metadata=True))
    assert (got.end_user, got.session_id, dict(got.tags or {})) == (
        "cust_1", "sess_9", visit.tags,
    )  # fmt: skip
    header = Visit("cust_2", None, {"feature": "kb-search", "env": "staging"}, True)
    sent = header.headers("embeddings")
    assert header.body_user is None
    got = read_attribution(sent, {}, Sources(openai_user=True))
    assert got.end_user == "cust_2" and dict(got.tags or {}) == header.tags
    assert NO_VISIT.headers("messages") == {}

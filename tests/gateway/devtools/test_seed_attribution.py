"""The seeded rows' end users, sessions and tags, drawn for a realistic mix of apps."""

from collections import Counter

import numpy as np

from gateway.devtools.seed_attribution import (
    FEATURES,
    HEAD_RANKS,
    MAX_SESSION,
    copy_stand_ins,
    customer_index,
    draw_attribution,
    end_user_id,
    plan_of,
    populations,
    session_lengths,
    stand_in_rank,
    zipf_ranks,
)

APPS = list(FEATURES)
SHARES = [0.32, 0.24, 0.16, 0.12, 0.1, 0.06]


def _draw(rows: int, end_users: int, seed: int = 3):
    rng = np.random.default_rng(seed)
    app_idx = rng.choice(len(APPS), size=rows, p=SHARES)
    return app_idx, draw_attribution(rng, app_idx, APPS, SHARES, end_users)


def test_populations_split_every_end_user_by_traffic_share():
    sizes = populations(100_000, SHARES)
    assert sum(sizes) == 100_000
    assert sizes == [32_000, 24_000, 16_000, 12_000, 10_000, 6_000]
    assert sum(populations(7, SHARES)) == 7


def test_end_user_ids_never_collide():
    ids = {end_user_id(i) for i in range(200_000)}
    assert len(ids) == 200_000
    assert all(i.startswith("cust_") and len(i) == 13 for i in list(ids)[:10])


def test_zipf_ranks_have_a_heavy_head_and_a_long_tail():
    ranks = zipf_ranks(np.random.default_rng(1), 10_000, 200_000, 1.0)
    counts = np.bincount(ranks, minlength=10_000)
    assert ranks.min() == 0 and ranks.max() < 10_000
    assert counts[0] > 10 * counts[100] > 0  # weight 1 against 1/101
    assert counts[:10].sum() / counts.sum() > 0.2  # the top 0.1% carry over a fifth
    assert np.median(counts[5_000:]) <= 4  # and the bottom half a few draws each


def test_session_runs_are_1_to_20_long_and_cover_the_rows_exactly():
    rng = np.random.default_rng(2)
    for rows in (0, 1, 19, 20_000):
        lengths = session_lengths(rng, rows)
        assert lengths.sum() == rows
        assert (lengths >= 1).all() and (lengths <= MAX_SESSION).all()
    lengths = session_lengths(rng, 100_000)
    assert 3 < lengths.mean() < 7 and lengths.max() == MAX_SESSION


def test_about_nine_rows_in_ten_have_an_end_user_and_all_have_tags():
    _, drawn = _draw(50_000, 2_000)
    with_user = sum(u is not None for u in drawn.end_users) / 50_000
    assert 0.86 < with_user < 0.94
    assert all(isinstance(t, dict) and t["feature"] and t["env"] for t in drawn.tags)
    # a session always belongs to an end user; an internal job has neither
    assert all(
        (u is None) == (s is None) for u, s in zip(drawn.end_users, drawn.sessions, strict=True)
    )
    assert all(
        (u is None) == ("plan" not in t) for u, t in zip(drawn.end_users, drawn.tags, strict=True)
    )


def test_a_session_is_a_run_of_consecutive_requests_of_one_end_user_and_app():
    app_idx, drawn = _draw(30_000, 1_000)
    positions: dict[str, list[int]] = {}
    for i, session in enumerate(drawn.sessions):
        if session is not None:
            positions.setdefault(session, []).append(i)
    sizes = Counter(len(p) for p in positions.values())
    assert min(sizes) == 1 and max(sizes) == MAX_SESSION and len(sizes) == MAX_SESSION
    for at in positions.values():
        assert len({drawn.end_users[i] for i in at}) == 1
        assert len({int(app_idx[i]) for i in at}) == 1
        # consecutive among its app's requests: nothing of that app falls in between
        inside = np.flatnonzero(app_idx[at[0] : at[-1] + 1] == app_idx[at[0]])
        assert len(inside) == len(at)


def test_end_users_per_app_are_long_tailed_and_apps_do_not_share_them():
    app_idx, drawn = _draw(100_000, 5_000)
    owners: dict[str, set[int]] = {}
    for a, user in zip(app_idx.tolist(), drawn.end_users, strict=True):
        if user is not None:
            owners.setdefault(user, set()).add(a)
    assert all(len(apps) == 1 for apps in owners.values())
    per_user = Counter(u for u in drawn.end_users if u is not None)
    ranked = [n for _, n in per_user.most_common()]
    total = sum(ranked)
    assert sum(ranked[:10]) / total > 0.15  # a few heavy customers
    assert sum(n <= 10 for n in ranked) / len(ranked) > 0.5  # many light ones
    assert np.median(ranked) < np.mean(ranked) / 2  # a long tail
    assert drawn.distinct_end_users == len(per_user) <= 5_000


def test_tags_are_features_envs_and_plans_fifty_values_in_all():
    _, drawn = _draw(200_000, 10_000)
    values = {pair for tags in drawn.tags for pair in tags.items()}
    assert drawn.distinct_tag_values == len(values) == 50
    keys = Counter(k for k, _ in values)
    assert keys == {"feature": 45, "env": 2, "plan": 3}
    assert all(8 <= len(f) <= 12 for f in FEATURES.values())
    envs = Counter(t["env"] for t in drawn.tags)
    assert 0.9 < envs["prod"] / 200_000 < 0.99
    # the heaviest customers are on enterprise, the light tail mostly free
    plans = Counter(t.get("plan") for t in drawn.tags)
    assert plans["enterprise"] > plans["pro"] > 0 and plans["free"] > 0


def test_no_end_users_means_internal_jobs_only():
    _, drawn = _draw(1_000, 0)
    assert drawn.distinct_end_users == 0
    assert set(drawn.end_users) == {None} and set(drawn.sessions) == {None}


def test_a_copy_turns_each_tail_customer_into_another_of_their_block_and_plan():
    n = 20_000
    for copy in (1, 2, 49):
        turned = [stand_in_rank(r, n, copy) for r in range(n)]
        assert sorted(turned) == list(range(n))  # no two customers merge in a copy
        assert turned[:HEAD_RANKS] == list(range(HEAD_RANKS))  # the head stays itself
        ranks = np.arange(n)
        assert (plan_of(ranks, n) == plan_of(np.asarray(turned), n)).all()
        # within the rank's dyadic block: Zipf weights within a factor of two
        assert all((r + 1).bit_length() == (t + 1).bit_length() for r, t in enumerate(turned))
    assert [stand_in_rank(r, n, 0) for r in range(n)] == list(range(n))
    # fifty copies of the customers a sample saw reach most of the tail it missed
    seen = range(HEAD_RANKS, n, 5)
    reached = {stand_in_rank(r, n, c) for r in seen for c in range(50)}
    assert len(reached) > 0.9 * (n - HEAD_RANKS)


def test_stand_ins_map_customer_ids_within_their_app():
    sizes = populations(100_000, SHARES)
    users = [end_user_id(i) for i in (0, 5, 31_999, 32_000 + 1_500, 99_999)]
    assert [customer_index(u) for u in users] == [0, 5, 31_999, 33_500, 99_999]
    pairs = dict(copy_stand_ins(users, sizes, 7))
    assert end_user_id(0) not in pairs and end_user_id(5) not in pairs  # the head
    for user, stand_in in pairs.items():
        index, other = customer_index(user), customer_index(stand_in)
        assert other != index
        assert (index < 32_000) == (other < 32_000)  # the same app's population
    assert end_user_id(31_999) in pairs and end_user_id(33_500) in pairs

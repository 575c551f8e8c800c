"""The Customers page's pure figures: shares, margins, growth, revenue from plans."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pytest

from dashboard.customers import economics as econ

D = Decimal


def test_top_users_carry_their_share_of_the_range():
    frame = pd.DataFrame(
        {"end_user": ["a", "b"], "requests": [3, 1], "tokens": [30, 10],
         "unknown_cost_requests": [0, 1], "spend_usd": [D("3"), None],
         "end_users": [2, 2], "total_spend_usd": [D("4"), D("4")]}
    )  # fmt: skip
    top = econ.top_users(frame)
    assert list(top["share_pct"]) == [D(75), None]  # unknown spend has no share, not 0
    assert econ.top_users(frame.iloc[0:0]).empty


def test_growth_percentages_against_the_week_before():
    frame = pd.DataFrame(
        {"end_user": ["a", "b"], "before_usd": [D("0"), D("2")], "recent_usd": [D("1"), D("5")],
         "increase_usd": [D("1"), D("3")]}
    )  # fmt: skip
    assert list(econ.growth_table(frame)["increase_pct"]) == [None, D(150)]


def test_margins_lowest_first_and_losing_only():
    frame = pd.DataFrame(
        {"end_user": ["a", "b", None], "requests": [1, 2, None],
         "spend_usd": [D("5"), D("1"), None], "revenue_usd": [D("4"), D("4"), None],
         "margin_usd": [D("-1"), D("3"), None]}
    )  # fmt: skip
    table = econ.margin_table(frame)
    assert list(table["end_user"]) == ["a", "b"]
    assert list(table["margin_pct"]) == [D(-25), D(75)]
    assert list(econ.margin_table(frame, losing_only=True)["end_user"]) == ["a"]


def test_revenue_over_a_range_counts_a_month_as_30_days():
    assert econ.revenue_for_range(D("30"), 7) == D(7)
    assert econ.revenue_for_range(D("9.99"), 30) == D("9.99")


def test_plans_from_csv_and_their_revenue():
    plans = econ.parse_plans("\ufeffEnd_User , Plan\nu1,pro\nu2, free \n")
    assert plans == {"u1": "pro", "u2": "free"}
    users, revenue, unpriced = econ.plan_revenue(plans, {"pro": D("60")}, 15)
    assert (users, revenue, unpriced) == (("u1",), (D(30),), ("free",))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("user,plan\nu1,pro\n", "columns end_user and plan"),
        ("end_user,plan\nu1,\n", "line 2"),
        ("end_user,plan\nu1,pro\nu1,free\n", "line 3: u1 is listed with two plans"),
    ],
)
def test_a_plans_file_that_cannot_be_used_says_why(text, says):
    with pytest.raises(econ.RevenueError, match=says):
        econ.parse_plans(text)


def test_prices_are_exact_and_never_negative():
    assert econ.parse_price(" $1,234.50 ") == D("1234.50")
    for bad in ("abc", "-1", "NaN", "Infinity"):
        with pytest.raises(econ.RevenueError):
            econ.parse_price(bad)

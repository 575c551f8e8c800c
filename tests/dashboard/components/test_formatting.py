from __future__ import annotations

from decimal import Decimal

from dashboard.components.formatting import format_pct, format_usd, relative_change


def test_money_reads_in_cents_from_a_dollar_and_sub_cents_below():
    assert format_usd(Decimal("1234.565")) == "$1,234.56"  # half-even
    assert format_usd(Decimal("0.00123456")) == "$0.0012"
    assert format_usd(Decimal("-2.5")) == "-$2.50"
    assert format_usd(Decimal("0E-10")) == "$0.00"


def test_unknown_money_is_never_zero():
    assert format_usd(None) == "unknown"
    assert format_pct(None) == "unknown"


def test_relative_change_needs_a_previous_figure():
    assert relative_change(Decimal(12), Decimal(10)) == "+20.0% vs previous period"
    assert relative_change(Decimal(12), None) is None
    assert relative_change(5, 0) is None

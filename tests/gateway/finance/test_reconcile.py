"""Ledger against invoice by day and model: differences above the threshold flagged."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gateway.finance.invoices import InvoiceLine
from gateway.finance.reconcile import Threshold, flagged, invoice_totals, reconcile

D = Decimal
DAY = dt.date(2026, 11, 2)


def test_matching_days_pass_and_differences_above_the_threshold_are_flagged():
    ledger = {(DAY, "gpt-4.1"): D("10.00"), (DAY, "gpt-4o-mini"): D("1.00")}
    invoice = invoice_totals(
        [
            InvoiceLine(DAY, "gpt-4.1", D("6.00"), "USD"),
            InvoiceLine(DAY, "gpt-4.1", D("4.005"), "USD"),  # 0.005 apart: within 0.01
            InvoiceLine(DAY, "gpt-4o-mini", D("1.50"), "USD"),
            InvoiceLine(DAY, "gpt-9", D("0.20"), "USD"),  # not in the ledger at all
        ]
    )
    matches = reconcile(ledger, invoice, "USD", Threshold(D("0.01")))
    assert [(m.model, m.difference, m.flagged) for m in matches] == [
        ("gpt-4.1", D("-0.005"), False),
        ("gpt-4o-mini", D("-0.50"), True),
        ("gpt-9", D("-0.20"), True),
    ]
    assert [m.model for m in flagged(matches)] == ["gpt-4o-mini", "gpt-9"]


def test_a_share_of_the_invoice_widens_the_threshold():
    ledger = {(DAY, "gpt-4.1"): D("102")}
    invoice = {(DAY, "gpt-4.1"): (D("100"), "USD")}
    assert flagged(reconcile(ledger, invoice, "USD", Threshold(D("0.01"), D("0.05")))) == []
    assert flagged(reconcile(ledger, invoice, "USD", Threshold(D("0.01"), D("0.01"))))


def test_an_invoice_in_another_currency_is_refused():
    with pytest.raises(ValueError, match="CNY"):
        reconcile({}, {(DAY, "m"): (D(1), "CNY")}, "USD", Threshold())

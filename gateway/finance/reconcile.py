"""The ledger against a provider's invoice, by day and model. Pure.

Both sides are in the provider's billing currency (the ledger's `actual_cost`). A
difference is flagged when it exceeds the threshold: an absolute amount, or a share of
the invoiced amount when that is larger (`max(abs, pct × |invoice|)`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from decimal import Decimal

from gateway.finance.invoices import InvoiceLine


@dataclasses.dataclass(frozen=True, slots=True)
class Threshold:
    absolute: Decimal = Decimal("0.01")
    share: Decimal = Decimal(0)  # 0.02 = 2% of the invoiced amount

    def allows(self, difference: Decimal, invoiced: Decimal) -> bool:
        return abs(difference) <= max(self.absolute, self.share * abs(invoiced))


@dataclasses.dataclass(frozen=True, slots=True)
class Match:
    day: dt.date
    model: str
    currency: str
    ledger: Decimal
    invoiced: Decimal
    flagged: bool

    @property
    def difference(self) -> Decimal:
        return self.ledger - self.invoiced


def invoice_totals(lines: Iterable[InvoiceLine]) -> dict[tuple[dt.date, str], tuple[Decimal, str]]:
    out: dict[tuple[dt.date, str], tuple[Decimal, str]] = {}
    for line in lines:
        key = (line.day, line.model)
        amount, currency = out.get(key, (Decimal(0), line.currency))
        if currency != line.currency:
            raise ValueError(f"{line.day} {line.model}: lines in {currency} and {line.currency}")
        out[key] = (amount + line.amount, currency)
    return out


def reconcile(
    ledger: Mapping[tuple[dt.date, str], Decimal],
    invoice: Mapping[tuple[dt.date, str], tuple[Decimal, str]],
    currency: str,
    threshold: Threshold,
) -> list[Match]:
    """One match per (day, model) on either side; a side without it counts 0."""
    out = []
    for day, model in sorted(set(ledger) | set(invoice)):
        ours = ledger.get((day, model), Decimal(0))
        theirs, cur = invoice.get((day, model), (Decimal(0), currency))
        if cur != currency:
            raise ValueError(f"the invoice is in {cur}; the provider bills in {currency}")
        diff = ours - theirs
        out.append(Match(day, model, currency, ours, theirs, not threshold.allows(diff, theirs)))
    return out


def flagged(matches: Iterable[Match]) -> list[Match]:
    return [m for m in matches if m.flagged]

"""Dated FX: which rate is in force on a day, and the price versions it makes. Pure.

A rate is units of a currency per USD from its `effective_from` day on (UTC); the rate in
force on a day is the latest one on or before it. A day before every dated rate keeps the
config's `fx_per_usd`. Applying a rate to a price version makes a new version (its id is a
content hash that includes the rate and the effective date), so versions already stored,
and the records that point at them, never change.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from decimal import Decimal

from gateway.domain.pricing import PriceCatalog, PriceVersion


@dataclasses.dataclass(frozen=True, slots=True)
class FxRate:
    currency: str
    effective_from: dt.date
    per_usd: Decimal

    def __post_init__(self) -> None:
        if len(self.currency) != 3 or not self.currency.isalpha():
            raise ValueError(f"currency must be a 3-letter code, got {self.currency!r}")
        if self.per_usd <= 0:
            raise ValueError(f"per_usd must be above 0, got {self.per_usd}")
        object.__setattr__(self, "currency", self.currency.upper())  # "cny" is CNY


@dataclasses.dataclass(frozen=True)
class FxSchedule:
    """Every dated rate, per currency, sorted by date; immutable, looked up in O(log n)."""

    by_currency: Mapping[str, tuple[FxRate, ...]] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, rates: Iterable[FxRate]) -> FxSchedule:
        grouped: dict[str, dict[dt.date, FxRate]] = {}
        for r in rates:
            # a later entry for the same day replaces an earlier one (a corrected rate)
            grouped.setdefault(r.currency.upper(), {})[r.effective_from] = r
        return cls(
            {
                c: tuple(sorted(d.values(), key=lambda r: r.effective_from))
                for c, d in grouped.items()
            }
        )

    def rate_on(self, currency: str, day: dt.date) -> FxRate | None:
        rates = self.by_currency.get(currency.upper(), ())
        i = bisect.bisect_right([r.effective_from for r in rates], day)
        return rates[i - 1] if i else None

    def in_force(self, day: dt.date) -> dict[str, FxRate]:
        found = {c: self.rate_on(c, day) for c in self.by_currency}
        return {c: r for c, r in found.items() if r is not None}

    def rates(self) -> list[FxRate]:
        return [r for rates in self.by_currency.values() for r in rates]


def version_at(version: PriceVersion, rate: FxRate | None) -> PriceVersion:
    """`version` priced at `rate` (a new version from the rate's day), or as it is."""
    if rate is None or version.billing_currency.upper() == "USD":
        return version
    if rate.currency != version.billing_currency.upper() or rate.per_usd == version.fx_per_usd:
        return version
    return dataclasses.replace(
        version,
        fx_per_usd=rate.per_usd,
        effective_from=max(version.effective_from, rate.effective_from),
    )


def catalog_on(catalog: PriceCatalog, schedule: FxSchedule, day: dt.date) -> PriceCatalog:
    """The config's catalog with the FX rates in force on `day`: what the replica prices
    that day's requests with."""
    in_force = schedule.in_force(day)
    if not in_force:
        return catalog
    return PriceCatalog(
        {
            name: version_at(v, in_force.get(v.billing_currency.upper()))
            for name, v in catalog.versions.items()
        }
    )


def dated_versions(catalog: PriceCatalog, schedule: FxSchedule) -> list[PriceVersion]:
    """Every price version the schedule makes out of the config's catalog: what the price
    sync stores, so that each record's version id joins a stored version."""
    out: dict[object, PriceVersion] = {}
    for v in catalog.versions.values():
        for rate in schedule.by_currency.get(v.billing_currency.upper(), ()):
            dated = version_at(v, rate)
            out[dated.id] = dated
    return list(out.values())


def next_change_after(schedule: FxSchedule, day: dt.date) -> dt.date | None:
    """The first day after `day` on which some rate changes (the replica re-prices then)."""
    later = [r.effective_from for r in schedule.rates() if r.effective_from > day]
    return min(later) if later else None

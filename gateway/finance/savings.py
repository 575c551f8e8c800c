"""What costgate saved, as one figure whose parts add up to it. Pure, no I/O.

The headline is *saved against no costgate*: what the same requests would have cost
without the gateway, minus what the providers billed. Without costgate an app calls the
alias's baseline model (or the model it named) at the official list price, and pays
the full input rate for every prompt token. Five steps lead from that cost down to the
bill, each a sum of ledger columns over the priced requests (docs/SAVINGS.md):

- routing: baseline list cost − list cost of the model that served the request
  (`coalesce(baseline_cost_usd, list_cost_usd) − list_cost_usd`; 0 without an alias);
- cached tokens: cached prompt tokens × (list input − list cached input rate) of the
  served model's price version (what provider-side prompt caching took off the list);
- provider price & FX: list cost − billed cost in USD of the requests an upstream
  answered (the provider's own table or multiplier, its currency and FX rate);
- batch discount: list − billed of the batch lines (endpoint `batch`): the provider's
  batch rate against the live list price of the same tokens (docs/BATCHES.md);
- cache hits: the list cost of the answers the response cache served (billed 0).

So no_costgate = list + routing + cached, and no_costgate − billed = routing + cached +
provider + batch + cache hits exactly, in Decimal. Requests with an unknown cost take no part
(their cost is shown as unknown elsewhere), so the four steps stay over one population.

Cents: the waterfall rounds the *running sum* of its steps to cents (half-even) and
shows each step as the difference of two rounded sums, so the rounded steps add up to
the headline rounded (the figure the Overview shows too) to the cent, and no step is
more than one cent off its exact value. The start is the no-costgate cost rounded; the
end bar, start − headline, is then within a cent of the bill rounded on its own.
"""

from __future__ import annotations

import dataclasses
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext

CENT = Decimal("0.01")
# sums of NUMERIC(20, 10) amounts over a whole ledger stay exact with room to spare
_EXACT = Context(prec=60, rounding=ROUND_HALF_EVEN)
ZERO = Decimal(0)

# the waterfall's steps, in the order they are taken off the no-costgate cost
STEPS = ("routing", "cached_tokens", "provider_price_fx", "batch_discount", "cache_hits")
STEP_LABELS = {
    "routing": "Routing",
    "cached_tokens": "Cached tokens",
    "provider_price_fx": "Provider price & FX",
    "batch_discount": "Batch discount",
    "cache_hits": "Cache hits",
}


@dataclasses.dataclass(frozen=True)
class LedgerSums:
    """Sums over the priced requests of a period (None when nothing was summed: 0)."""

    list_usd: Decimal | None  # list_cost_usd
    billed_usd: Decimal | None  # actual_cost_usd
    routing_usd: Decimal | None  # coalesce(baseline_cost_usd, list_cost_usd) − list_cost_usd
    cached_tokens_usd: Decimal | None  # cached tokens × (list input − list cached input)
    cache_hits_usd: Decimal | None  # list − billed of the response-cache hits
    batch_usd: Decimal | None = None  # list − billed of the batch lines


@dataclasses.dataclass(frozen=True)
class Savings:
    """The headline and its steps, exact."""

    no_costgate_usd: Decimal
    billed_usd: Decimal
    steps: dict[str, Decimal]  # STEPS -> amount; a step may be negative

    @property
    def saved_usd(self) -> Decimal:
        return self.no_costgate_usd - self.billed_usd

    @property
    def saved_pct(self) -> Decimal | None:
        """The headline as a share of the no-costgate cost (None when that is 0)."""
        if not self.no_costgate_usd:
            return None
        return self.saved_usd * 100 / self.no_costgate_usd

    def in_cents(self) -> Savings:
        """The same waterfall rounded to cents, its steps adding up to its headline."""
        return self.rounded(CENT)

    def rounded(self, quantum: Decimal) -> Savings:
        """The waterfall rounded to `quantum` (a cent; finer for a demo's few cents)."""
        with localcontext(_EXACT):
            return self._rounded(quantum)

    def _rounded(self, quantum: Decimal) -> Savings:
        start = to_cents(self.no_costgate_usd, quantum)
        running, previous = Decimal(0), Decimal(0)
        steps = {}
        for name in STEPS:
            running += self.steps[name]
            current = to_cents(running, quantum)
            steps[name] = current - previous
            previous = current
        # `previous` is the headline rounded; the bill is what the steps leave of the start
        return Savings(no_costgate_usd=start, billed_usd=start - previous, steps=steps)


def to_cents(amount: Decimal, quantum: Decimal = CENT) -> Decimal:
    return amount.quantize(quantum, rounding=ROUND_HALF_EVEN)


def _d(v: Decimal | None) -> Decimal:
    return ZERO if v is None else Decimal(v)


def decompose(sums: LedgerSums) -> Savings:
    """The no-costgate cost, the bill and the five steps between them (module docstring)."""
    list_usd, billed = _d(sums.list_usd), _d(sums.billed_usd)
    routing, cached = _d(sums.routing_usd), _d(sums.cached_tokens_usd)
    hits, batch = _d(sums.cache_hits_usd), _d(sums.batch_usd)
    with localcontext(_EXACT):
        return Savings(
            no_costgate_usd=list_usd + routing + cached,
            billed_usd=billed,
            steps={
                "routing": routing,
                "cached_tokens": cached,
                "provider_price_fx": list_usd - billed - hits - batch,
                "batch_discount": batch,
                "cache_hits": hits,
            },
        )


def record_sums(
    list_usd: Decimal | None,
    billed_usd: Decimal | None,
    baseline_usd: Decimal | None,
    cached_tokens_usd: Decimal | None,
    cache_hit: bool,
    batch: bool = False,
) -> LedgerSums:
    """One ledger row's contribution (what the SQL sums row by row); an unpriced row
    (unknown list or billed cost) contributes nothing."""
    if list_usd is None or billed_usd is None:
        return LedgerSums(None, None, None, None, None)
    routing = (list_usd if baseline_usd is None else baseline_usd) - list_usd
    return LedgerSums(
        list_usd=list_usd,
        billed_usd=billed_usd,
        routing_usd=routing,
        cached_tokens_usd=cached_tokens_usd or ZERO,
        cache_hits_usd=list_usd - billed_usd if cache_hit else ZERO,
        batch_usd=list_usd - billed_usd if batch else ZERO,
    )


def add(a: LedgerSums, b: LedgerSums) -> LedgerSums:
    def plus(x: Decimal | None, y: Decimal | None) -> Decimal | None:
        return y if x is None else x if y is None else x + y

    return LedgerSums(
        *(plus(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(LedgerSums))
    )

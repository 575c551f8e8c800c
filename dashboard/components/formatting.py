"""How numbers read on screen (pure): money from exact Decimals, unknown as "unknown"."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

UNKNOWN = "unknown"
CENT = Decimal("0.01")
SUB_CENT = Decimal("0.0001")


def money_quantum(value: Decimal) -> Decimal:
    """Cents from $1 up (and for zero); four places below, so a demo's few cents still read."""
    return CENT if abs(value) >= 1 or value == 0 else SUB_CENT


def format_usd(value: Decimal | None) -> str:
    if value is None:
        return UNKNOWN
    q = value.quantize(money_quantum(value), rounding=ROUND_HALF_EVEN)
    sign = "-" if q < 0 else ""
    return f"{sign}${abs(q):,}"


def format_pct(value: Decimal | float | None, places: int = 1) -> str:
    if value is None:
        return UNKNOWN
    return f"{float(value):.{places}f}%"


def format_count(value: int | None) -> str:
    return UNKNOWN if value is None else f"{int(value):,}"


def format_ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def format_rate(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.2f}%"


def relative_change(
    now: Decimal | float | int | None, before: Decimal | float | int | None
) -> str | None:
    """'+12.3% vs previous period', or None when there is nothing to compare with."""
    if now is None or before is None or before == 0:
        return None
    change = (Decimal(str(now)) - Decimal(str(before))) * 100 / abs(Decimal(str(before)))
    return f"{float(change):+.1f}% vs previous period"


def money_strings(values: list[Decimal | None]) -> list[str]:
    return [format_usd(v) for v in values]

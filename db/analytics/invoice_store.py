"""Imported provider invoices in `invoice_lines`: one import replaces the lines of the
same provider and days it covers (re-importing a corrected export is not double counting)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy import Engine, delete, insert, select

from db.engine import engine_scope
from db.models import InvoiceLine as InvoiceLineRow
from gateway.finance.invoices import InvoiceLine


def save_invoice(
    engine_or_url: Engine | str | None,
    provider: str,
    source: str,
    import_id: str,
    lines: Sequence[InvoiceLine],
) -> int:
    if not lines:
        return 0
    days = sorted({line.day for line in lines})
    with engine_scope(engine_or_url) as engine, engine.begin() as conn:
        conn.execute(
            delete(InvoiceLineRow).where(
                InvoiceLineRow.provider == provider, InvoiceLineRow.day.in_(days)
            )
        )
        conn.execute(
            insert(InvoiceLineRow),
            [
                {
                    "import_id": import_id,
                    "source": source,
                    "provider": provider,
                    "day": line.day,
                    "model": line.model,
                    "description": line.description,
                    "amount": line.amount,
                    "currency": line.currency,
                }
                for line in lines
            ],
        )
    return len(lines)


def load_invoice(
    engine_or_url: Engine | str | None, provider: str, start: dt.date, end: dt.date
) -> list[InvoiceLine]:
    q = (
        select(
            InvoiceLineRow.day,
            InvoiceLineRow.model,
            InvoiceLineRow.amount,
            InvoiceLineRow.currency,
            InvoiceLineRow.description,
        )
        .where(
            InvoiceLineRow.provider == provider,
            InvoiceLineRow.day >= start,
            InvoiceLineRow.day <= end,
        )
        .order_by(InvoiceLineRow.day, InvoiceLineRow.model)
    )
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        return [InvoiceLine(d, m, a, c, desc) for d, m, a, c, desc in conn.execute(q)]


def invoiced_providers(engine_or_url: Engine | str | None) -> list[str]:
    with engine_scope(engine_or_url) as engine, engine.connect() as conn:
        q = select(InvoiceLineRow.provider).distinct().order_by(InvoiceLineRow.provider)
        return list(conn.execute(q).scalars())

"""Providers' usage and cost exports, read into invoice lines. Pure (text in, lines out).

Formats:
- `openai`: the OpenAI platform's cost export (Usage → Export → Cost data, grouped by
  line item, 1 day): `start_time` (Unix seconds, or `start_time_iso`), `amount_value`,
  `amount_currency`, `line_item` ("gpt-4o-2024-08-06, input"), `project_id`, ...
- `anthropic`: the Claude Console's cost export: `usage_date_utc`, `model` ("Claude
  Haiku 4.5"), `token_type`, `cost_usd`, ...
- `generic`: any CSV, with a mapping of our fields to its column names
  (`day=Date,model=Model,amount=Cost[,currency=Currency]`) and a currency when the file
  has no currency column.
Model names are matched to the config's models of the provider (name or upstream id,
case, dots and spaces aside, a dated snapshot suffix dropped); an unknown one is kept as
it is, so it shows up as a difference instead of disappearing.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation

FORMATS = ("openai", "anthropic", "generic")
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


class InvoiceFormatError(ValueError):
    """A file that is not the format it was said to be; the message names the line."""


@dataclasses.dataclass(frozen=True, slots=True)
class InvoiceLine:
    day: dt.date
    model: str
    amount: Decimal
    currency: str
    description: str | None = None


def model_key(name: str) -> str:
    """A model id as a comparable key: 'Claude Haiku 4.5' = 'claude-haiku-4-5'."""
    key = re.sub(r"[\s._]+", "-", name.strip().lower())
    return _SNAPSHOT.sub("", key)


def model_matcher(models: Mapping[str, str]) -> dict[str, str]:
    """{public name: upstream id} of one provider's models -> {key: public name}."""
    out = {}
    for name, upstream in models.items():
        out[model_key(upstream)] = name
        out[model_key(name)] = name  # the public name wins where both match
    return out


def _decimal(text: str, where: str) -> Decimal:
    try:
        return Decimal(text.strip())
    except (InvalidOperation, AttributeError):
        raise InvoiceFormatError(f"{where}: not a number: {text!r}") from None


def _date(text: str, where: str) -> dt.date:
    text = text.strip()
    try:
        if text.isdigit():
            return dt.datetime.fromtimestamp(int(text), tz=dt.UTC).date()
        return dt.date.fromisoformat(text[:10])
    except ValueError:
        raise InvoiceFormatError(f"{where}: not a date: {text!r}") from None


def _rows(text: str, needed: Iterable[str]) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    missing = [c for c in needed if c not in (reader.fieldnames or ())]
    if missing:
        raise InvoiceFormatError(f"missing column(s) {', '.join(missing)}")
    return list(reader)


def parse_openai(text: str, match: Mapping[str, str]) -> list[InvoiceLine]:
    rows = _rows(text, ("amount_value", "line_item"))
    out = []
    for i, row in enumerate(rows, start=2):
        where = f"line {i}"
        when = row.get("start_time") or row.get("start_time_iso") or ""
        model_text, _, kind = (row["line_item"] or "").partition(",")
        if not model_text.strip():
            continue  # an organisation-level line (credits, fine-tuning seats)
        key = model_key(model_text)
        out.append(
            InvoiceLine(
                day=_date(when, where),
                model=match.get(key, key),
                amount=_decimal(row["amount_value"], where),
                currency=(row.get("amount_currency") or "usd").upper(),
                description=row["line_item"].strip(),
            )
        )
    return out


def parse_anthropic(text: str, match: Mapping[str, str]) -> list[InvoiceLine]:
    rows = _rows(text, ("usage_date_utc", "model", "cost_usd"))
    out = []
    for i, row in enumerate(rows, start=2):
        where = f"line {i}"
        key = model_key(row["model"] or "")
        if not key:
            continue  # web search or code execution without a model
        kind = row.get("token_type") or row.get("cost_type") or ""
        out.append(
            InvoiceLine(
                day=_date(row["usage_date_utc"], where),
                model=match.get(key, key),
                amount=_decimal(row["cost_usd"], where),
                currency="USD",
                description=f"{row['model']} {kind}".strip(),
            )
        )
    return out


def parse_mapping(text: str) -> dict[str, str]:
    """ "day=Date,model=Model,amount=Cost" -> {our field: their column}."""
    out = {}
    for part in text.split(","):
        field, sep, column = part.partition("=")
        if not sep:
            raise InvoiceFormatError(f"expected field=column, got {part!r}")
        out[field.strip()] = column.strip()
    unknown = set(out) - {"day", "model", "amount", "currency"}
    if unknown:
        raise InvoiceFormatError(f"unknown field(s) {', '.join(sorted(unknown))}")
    for needed in ("day", "model", "amount"):
        if needed not in out:
            raise InvoiceFormatError(f"the mapping needs {needed}=<column>")
    return out


def parse_generic(
    text: str, match: Mapping[str, str], mapping: Mapping[str, str], currency: str | None
) -> list[InvoiceLine]:
    rows = _rows(text, mapping.values())
    if "currency" not in mapping and not currency:
        raise InvoiceFormatError("no currency column mapped: give the file's currency")
    out = []
    for i, row in enumerate(rows, start=2):
        where = f"line {i}"
        key = model_key(row[mapping["model"]] or "")
        cur = row[mapping["currency"]] if "currency" in mapping else currency
        out.append(
            InvoiceLine(
                day=_date(row[mapping["day"]], where),
                model=match.get(key, key),
                amount=_decimal(row[mapping["amount"]], where),
                currency=(cur or "").strip().upper(),
                description=row[mapping["model"]],
            )
        )
    return out


def parse_invoice(
    fmt: str,
    text: str,
    models: Mapping[str, str],
    mapping: Mapping[str, str] | None = None,
    currency: str | None = None,
) -> list[InvoiceLine]:
    """The lines of an export in format `fmt`; `models` is {public name: upstream id} of
    the provider whose export it is."""
    match = model_matcher(models)
    if fmt == "openai":
        return parse_openai(text, match)
    if fmt == "anthropic":
        return parse_anthropic(text, match)
    if fmt == "generic":
        return parse_generic(text, match, mapping or {}, currency)
    raise InvoiceFormatError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")

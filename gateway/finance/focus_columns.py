"""FOCUS 1.2 column rules, as data, and a validator for rows. Pure.

Read from the specification (FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, tag v1.2,
`specification/columns/*.md` and `attributes/*.md`): each column's feature level, data
type, whether it allows nulls, and its allowed values where the spec lists them. The
export (`focus_rows`) writes every mandatory column plus the conditional ones costgate
can fill; custom columns carry the `x_` prefix (ColumnHandling) and come last.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Literal

DataType = Literal["String", "Decimal", "DateTime", "JSON"]
Level = Literal["Mandatory", "Conditional", "Recommended"]

# ISO 8601 extended with the Z designator (DateTimeFormat)
DATETIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
# NumericFormat: integer, decimal or E notation; no "+", no commas, no units
NUMERIC_RE = re.compile(r"^-?\d+(\.\d+)?(E-?\d+)?$")
CURRENCY_RE = re.compile(r"^[A-Z]{3}$")  # ISO 4217 (CurrencyFormat)

CHARGE_CATEGORIES = ("Usage", "Purchase", "Tax", "Credit", "Adjustment")
CHARGE_CLASSES = ("Correction",)
CHARGE_FREQUENCIES = ("One-Time", "Recurring", "Usage-Based")
PRICING_CATEGORIES = ("Standard", "Dynamic", "Committed", "Other")
SERVICE_CATEGORIES = (
    "AI and Machine Learning",
    "Analytics",
    "Business Applications",
    "Compute",
    "Databases",
    "Developer Tools",
    "Multicloud",
    "Identity",
    "Integration",
    "Internet of Things",
    "Management and Governance",
    "Media",
    "Migration",
    "Mobile",
    "Networking",
    "Security",
    "Storage",
    "Web",
    "Other",
)


@dataclasses.dataclass(frozen=True, slots=True)
class FocusColumn:
    name: str
    data_type: DataType
    level: Level
    nullable: bool
    allowed: tuple[str, ...] = ()
    currency: bool = False  # CurrencyFormat


def _c(
    name: str,
    data_type: DataType,
    level: Level,
    nullable: bool,
    allowed: tuple[str, ...] = (),
    currency: bool = False,
) -> FocusColumn:
    return FocusColumn(name, data_type, level, nullable, allowed, currency)


# Every mandatory column of FOCUS 1.2, then the conditional and recommended ones we fill.
COLUMNS: tuple[FocusColumn, ...] = (
    _c("BilledCost", "Decimal", "Mandatory", False),
    _c("BillingAccountId", "String", "Mandatory", False),
    _c("BillingAccountName", "String", "Mandatory", True),
    _c("BillingCurrency", "String", "Mandatory", False, currency=True),
    _c("BillingPeriodEnd", "DateTime", "Mandatory", False),
    _c("BillingPeriodStart", "DateTime", "Mandatory", False),
    _c("ChargeCategory", "String", "Mandatory", False, CHARGE_CATEGORIES),
    _c("ChargeClass", "String", "Mandatory", True, CHARGE_CLASSES),
    _c("ChargeDescription", "String", "Mandatory", True),
    _c("ChargePeriodEnd", "DateTime", "Mandatory", False),
    _c("ChargePeriodStart", "DateTime", "Mandatory", False),
    _c("ContractedCost", "Decimal", "Mandatory", False),
    _c("EffectiveCost", "Decimal", "Mandatory", False),
    _c("InvoiceIssuerName", "String", "Mandatory", False),
    _c("ListCost", "Decimal", "Mandatory", False),
    _c("PricingQuantity", "Decimal", "Mandatory", True),
    _c("PricingUnit", "String", "Mandatory", True),
    _c("ProviderName", "String", "Mandatory", False),
    _c("PublisherName", "String", "Mandatory", False),
    _c("ServiceCategory", "String", "Mandatory", False, SERVICE_CATEGORIES),
    _c("ServiceName", "String", "Mandatory", False),
    _c("ChargeFrequency", "String", "Recommended", False, CHARGE_FREQUENCIES),
    _c("ConsumedQuantity", "Decimal", "Conditional", True),
    _c("ConsumedUnit", "String", "Conditional", True),
    _c("ContractedUnitPrice", "Decimal", "Conditional", True),
    _c("ListUnitPrice", "Decimal", "Conditional", True),
    _c("PricingCategory", "String", "Conditional", True, PRICING_CATEGORIES),
    _c("SkuId", "String", "Conditional", True),
    _c("SkuMeter", "String", "Conditional", True),
    _c("SubAccountId", "String", "Conditional", True),
    _c("SubAccountName", "String", "Conditional", True),
    _c("Tags", "JSON", "Conditional", True),
)
MANDATORY = tuple(c.name for c in COLUMNS if c.level == "Mandatory")
BY_NAME = {c.name: c for c in COLUMNS}

# costgate's own columns, after every FOCUS column (ColumnHandling)
CUSTOM_COLUMNS = (
    "x_TokenClass",
    "x_Model",
    "x_ListCostUsd",
    "x_BilledCostUsd",
    "x_FxPerUsd",
    "x_CacheHit",
    "x_PriceVersionId",
    "x_LedgerRequests",
)
HEADER = tuple(c.name for c in COLUMNS) + CUSTOM_COLUMNS

Value = str | Decimal | None


def _text(value: Value) -> str:
    return format(value, "f") if isinstance(value, Decimal) else str(value)


def check_value(column: FocusColumn, value: Value) -> str | None:
    """What is wrong with one value of `column`, or None."""
    if value is None or value == "":
        return None if column.nullable else f"{column.name} must not be null"
    if isinstance(value, Decimal):  # the export's own values: no text round trip
        if column.data_type != "Decimal" or not value.is_finite():
            return f"{column.name} is not a FOCUS {column.data_type} value: {value}"
        return None
    text = _text(value)
    if column.data_type == "Decimal":
        if not NUMERIC_RE.match(text):
            return f"{column.name} is not a FOCUS numeric value: {text!r}"
        try:
            Decimal(text)
        except InvalidOperation:
            return f"{column.name} is not a decimal: {text!r}"
    elif column.data_type == "DateTime":
        if not DATETIME_RE.match(text):
            return f"{column.name} is not YYYY-MM-DDTHH:mm:ssZ: {text!r}"
        try:
            dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            return f"{column.name} is not a real date and time: {text!r}"
    elif column.data_type == "JSON":
        try:
            parsed = json.loads(text)
        except ValueError:
            return f"{column.name} is not JSON: {text!r}"
        if not isinstance(parsed, dict):
            return f"{column.name} is not a key-value object: {text!r}"
    if column.allowed and text not in column.allowed:
        return f"{column.name} {text!r} is not one of the allowed values"
    if column.currency and not CURRENCY_RE.match(text):
        return f"{column.name} is not an ISO 4217 code: {text!r}"
    return None


def check_row(row: Mapping[str, Value]) -> list[str]:
    """Every rule a row breaks: presence, type, nullability, allowed values, and the
    rules between columns that apply to usage rows (PricingUnit with PricingQuantity,
    ConsumedUnit with ConsumedQuantity, both not null on usage)."""
    problems = [f"{name} is missing" for name in MANDATORY if name not in row]
    for name, value in row.items():
        column = BY_NAME.get(name)
        if column is None:
            if not name.startswith("x_"):
                problems.append(f"{name} is neither a FOCUS column nor prefixed x_")
            continue
        problem = check_value(column, value)
        if problem:
            problems.append(problem)

    def null(name: str) -> bool:
        return row.get(name) in (None, "")

    if null("PricingQuantity") != null("PricingUnit"):
        problems.append("PricingUnit must be null exactly when PricingQuantity is")
    if null("ConsumedQuantity") != null("ConsumedUnit"):
        problems.append("ConsumedUnit must be null exactly when ConsumedQuantity is")
    if row.get("ChargeCategory") == "Usage" and null("ChargeClass"):
        for name in ("PricingQuantity", "ConsumedQuantity", "PricingCategory"):
            if name in row and null(name):
                problems.append(f"{name} must not be null on a usage row")
    return problems


def check_rows(rows: Iterable[Mapping[str, Value]]) -> list[str]:
    out: list[str] = []
    for i, row in enumerate(rows):
        out.extend(f"row {i}: {p}" for p in check_row(row))
    return out

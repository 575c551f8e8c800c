"""The FOCUS 1.2 column rules as written down from the specification, and the validator."""

from __future__ import annotations

from decimal import Decimal

from gateway.finance.focus_columns import BY_NAME, HEADER, MANDATORY, check_row, check_value

# FOCUS 1.2 (FOCUS_Spec tag v1.2, specification/columns): every column whose feature level
# is Mandatory
SPEC_MANDATORY = {
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass",
    "ChargeDescription", "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost",
    "EffectiveCost", "InvoiceIssuerName", "ListCost", "PricingQuantity", "PricingUnit",
    "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
}  # fmt: skip


def test_every_mandatory_column_of_focus_1_2_is_in_the_rules():
    assert set(MANDATORY) == SPEC_MANDATORY


def test_custom_columns_come_after_every_focus_column_and_carry_the_x_prefix():
    focus = [h for h in HEADER if not h.startswith("x_")]
    assert HEADER[: len(focus)] == tuple(focus)
    assert all(h.startswith("x_") for h in HEADER[len(focus) :])


def test_costs_must_not_be_null_but_charge_class_may():
    for name in ("BilledCost", "ListCost", "ContractedCost", "EffectiveCost"):
        assert check_value(BY_NAME[name], None) == f"{name} must not be null"
    assert check_value(BY_NAME["ChargeClass"], None) is None


def test_numeric_format_refuses_units_signs_and_commas():
    column = BY_NAME["BilledCost"]
    for good in (Decimal("1.5"), "-3", "35.2E-7", Decimal("0.0000000001")):
        assert check_value(column, good) is None, good
    for bad in ("$1.50", "+1", "1,000", "1/2", "12 tokens"):
        assert check_value(column, bad) is not None, bad


def test_date_times_must_be_utc_with_the_z_designator():
    column = BY_NAME["ChargePeriodStart"]
    assert check_value(column, "2026-11-03T00:00:00Z") is None
    assert check_value(column, "2026-11-03 00:00:00") is not None
    assert check_value(column, "2026-11-03T00:00:00+01:00") is not None


def test_allowed_values_and_currency_codes():
    assert check_value(BY_NAME["ChargeCategory"], "Usage") is None
    assert check_value(BY_NAME["ChargeCategory"], "usage") is not None
    assert check_value(BY_NAME["ServiceCategory"], "AI and Machine Learning") is None
    assert check_value(BY_NAME["ChargeClass"], "Refund") is not None
    assert check_value(BY_NAME["BillingCurrency"], "CNY") is None
    assert check_value(BY_NAME["BillingCurrency"], "yuan") is not None
    assert check_value(BY_NAME["Tags"], '{"app": "x"}') is None
    assert check_value(BY_NAME["Tags"], "[1]") is not None


def test_a_row_missing_a_mandatory_column_or_with_an_unprefixed_extra_is_refused():
    problems = check_row({"BilledCost": Decimal(1), "Team": "payments"})
    assert "ListCost is missing" in problems
    assert "Team is neither a FOCUS column nor prefixed x_" in problems


def test_pricing_unit_goes_with_pricing_quantity():
    row = {name: None for name in MANDATORY}
    row.update(PricingQuantity=Decimal(10), PricingUnit=None)
    assert "PricingUnit must be null exactly when PricingQuantity is" in check_row(row)


def test_decimals_must_be_finite_and_in_decimal_columns():
    assert check_value(BY_NAME["ListCost"], Decimal("NaN")) is not None
    assert check_value(BY_NAME["ChargeCategory"], Decimal(1)) is not None
    assert check_value(BY_NAME["ChargePeriodStart"], "2026-02-30T00:00:00Z") is not None

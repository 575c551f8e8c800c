"""Reading providers' exports: OpenAI's cost CSV, the Claude Console's cost CSV, a generic
CSV with a column mapping; model names matched to the config's."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gateway.finance.invoices import (
    InvoiceFormatError,
    model_key,
    parse_invoice,
    parse_mapping,
)

OPENAI_MODELS = {"gpt-4.1": "gpt-4.1", "gpt-4o-mini": "gpt-4o-mini"}
ANTHROPIC_MODELS = {"claude-haiku-4.5": "claude-haiku-4-5"}

OPENAI_CSV = """start_time,end_time,amount_value,amount_currency,line_item,project_id,project_name,organization_id,organization_name
1793577600,1793664000,0.125,usd,"gpt-4.1-2025-04-14, input",proj_1,checkout,org_1,Acme
1793577600,1793664000,0.5,usd,"gpt-4.1-2025-04-14, output",proj_1,checkout,org_1,Acme
1793577600,1793664000,0.01,usd,"gpt-4o-mini, input",proj_1,checkout,org_1,Acme
1793577600,1793664000,1.00,usd,,,,org_1,Acme
"""  # noqa: E501

ANTHROPIC_CSV = """usage_date_utc,model,workspace,api_key,usage_type,context_window,token_type,cost_usd,list_price_usd,cost_type
2026-11-02,Claude Haiku 4.5,Default,demo-key,message,≤ 200k,input_no_cache,0.05,0.05,token
2026-11-02,Claude Haiku 4.5,Default,demo-key,message,≤ 200k,output,0.02,0.02,token
2026-11-02,,Default,demo-key,web_search,,,0.01,0.01,web_search
"""  # noqa: E501


def test_openai_cost_lines_by_day_and_model():
    lines = parse_invoice("openai", OPENAI_CSV, OPENAI_MODELS)
    assert [(x.day, x.model, x.amount, x.currency) for x in lines] == [
        (dt.date(2026, 11, 2), "gpt-4.1", Decimal("0.125"), "USD"),
        (dt.date(2026, 11, 2), "gpt-4.1", Decimal("0.5"), "USD"),
        (dt.date(2026, 11, 2), "gpt-4o-mini", Decimal("0.01"), "USD"),
    ]


def test_anthropic_console_lines_with_display_names_matched():
    lines = parse_invoice("anthropic", ANTHROPIC_CSV, ANTHROPIC_MODELS)
    assert {x.model for x in lines} == {"claude-haiku-4.5"}
    assert sum(x.amount for x in lines) == Decimal("0.07")


def test_a_generic_csv_through_a_column_mapping():
    text = "Date,Model,Cost\n2026-11-02,gpt-4.1,1.50\n2026-11-03,GPT-4.1,2\n"
    mapping = parse_mapping("day=Date,model=Model,amount=Cost")
    lines = parse_invoice("generic", text, OPENAI_MODELS, mapping, currency="cny")
    assert [(x.day.day, x.model, x.amount, x.currency) for x in lines] == [
        (2, "gpt-4.1", Decimal("1.50"), "CNY"),
        (3, "gpt-4.1", Decimal("2"), "CNY"),
    ]


def test_an_unknown_model_is_kept_so_it_shows_as_a_difference():
    text = "Date,Model,Cost\n2026-11-02,gpt-9,1\n"
    mapping = parse_mapping("day=Date,model=Model,amount=Cost")
    (line,) = parse_invoice("generic", text, OPENAI_MODELS, mapping, currency="USD")
    assert line.model == "gpt-9"


def test_bad_files_name_what_is_wrong():
    with pytest.raises(InvoiceFormatError, match="missing column"):
        parse_invoice("openai", "a,b\n1,2\n", OPENAI_MODELS)
    with pytest.raises(InvoiceFormatError, match="line 2: not a number"):
        parse_invoice("anthropic", "usage_date_utc,model,cost_usd\n2026-11-02,x,abc\n", {})
    with pytest.raises(InvoiceFormatError, match="currency"):
        parse_invoice("generic", "D,M,C\n", {}, parse_mapping("day=D,model=M,amount=C"))
    with pytest.raises(InvoiceFormatError, match="needs amount"):
        parse_mapping("day=D,model=M")
    with pytest.raises(InvoiceFormatError, match="unknown format"):
        parse_invoice("csv", "", {})


def test_model_keys_ignore_case_dots_spaces_and_snapshot_dates():
    assert model_key("Claude Haiku 4.5") == model_key("claude-haiku-4-5") == "claude-haiku-4-5"
    assert model_key("gpt-4o-2024-08-06") == "gpt-4o"
    assert model_key("claude-3-5-sonnet-20241022") == "claude-3-5-sonnet"

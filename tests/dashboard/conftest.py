"""The dashboard tests' own ledger clean-up.

Not the shared `clean_ledger`: that one also empties the key tables, and a gateway
started earlier in the session (the browser test's) would lose its app key. These tests
empty only what they fill (usage rows, routing changes, budgets), before and after, so
that their synthetic history never reaches another test's sums.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text


def _empty(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE usage_records, routing_changes RESTART IDENTITY"))
        # budgets' alerts and leases go with them (foreign keys); their audit trail too
        conn.execute(text("TRUNCATE budgets, budget_changes RESTART IDENTITY CASCADE"))


@pytest.fixture
def empty_usage(ledger_engine: Engine) -> Iterator[None]:
    _empty(ledger_engine)
    yield
    _empty(ledger_engine)

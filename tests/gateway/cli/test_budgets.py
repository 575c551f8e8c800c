"""`costgate budgets` and `keys create --rpm/--tpm` against the test database."""

from __future__ import annotations

import getpass
from decimal import Decimal

import pytest

from db.budgets import budget_changes, load_budgets
from db.keys import hash_key, load_active_keys
from gateway.cli.main import main
from gateway.domain.budgets import BudgetPeriod, BudgetScope

pytestmark = pytest.mark.usefixtures("clean_ledger")


@pytest.fixture
def ledger_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", database_url)
    return database_url


def test_set_list_change_remove_and_the_audit_trail(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["budgets", "set", "--app", "shop", "--usd", "0.02", "--period", "day"]) == 0
    assert "daily budget of $0.02 on app 'shop'" in capsys.readouterr().out
    assert (
        main(
            [
                "budgets",
                "set",
                "--all",
                "--usd",
                "500",
                "--period",
                "month",
                "--soft",
                "--alert-at",
                "90,50",
            ]
        )
        == 0
    )
    (shop, whole) = load_budgets(ledger_env)
    assert (shop.scope, shop.limit_usd, shop.hard) == (BudgetScope.APP, Decimal("0.02"), True)
    assert (whole.scope, whole.hard, whole.alert_at) == (BudgetScope.ALL, False, (50, 90))
    capsys.readouterr()
    assert main(["budgets", "list"]) == 0
    listing = capsys.readouterr().out
    assert "app:shop" in listing and "$0.02" in listing and "soft" in listing
    assert "SPENT" in listing and "RESERVED" in listing and "REMAINING" in listing
    assert main(["budgets", "remove", "--app", "shop"]) == 0
    assert [b.scope for b in load_budgets(ledger_env)] == [BudgetScope.ALL]
    trail = budget_changes(ledger_env)
    assert {c.actor for c in trail} == {getpass.getuser()}
    assert trail[0].after is None and trail[0].before is not None
    assert main(["budgets", "remove", "--app", "shop"]) == 1


def test_a_key_budget_takes_the_keys_full_id_from_a_prefix(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "create", "--app", "shop", "--rpm", "20", "--tpm", "1000"]) == 0
    key = capsys.readouterr().out.strip()
    info = load_active_keys(ledger_env)[hash_key(key)]
    assert (info.rpm_limit, info.tpm_limit) == (20, 1000)
    prefix = str(info.key_id)[:8]
    assert main(["budgets", "set", "--key", prefix, "--usd", "1", "--period", "week"]) == 0
    (b,) = load_budgets(ledger_env)
    assert (b.scope, b.scope_value, b.period) == (
        BudgetScope.KEY,
        str(info.key_id),
        BudgetPeriod.WEEK,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["budgets", "set", "--app", "a", "--usd", "-1", "--period", "day"],
        ["budgets", "set", "--app", "a", "--usd", "x", "--period", "day"],
        ["budgets", "set", "--app", "a", "--usd", "1", "--period", "year"],
        ["budgets", "set", "--app", "a", "--team", "b", "--usd", "1", "--period", "day"],
        ["budgets", "set", "--app", "a", "--usd", "1", "--period", "day", "--alert-at", "0"],
        ["keys", "create", "--app", "a", "--rpm", "0"],
    ],
)
def test_bad_arguments_are_refused(ledger_env: str, argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert load_budgets(ledger_env) == []


def test_each_user_and_tag_budgets_set_list_status_and_remove(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    each = ["--app", "shop", "--each-user"]
    assert main(["budgets", "set", *each, "--usd", "0.50", "--period", "day"]) == 0
    assert "daily budget of $0.50 on each end user of app 'shop'" in capsys.readouterr().out
    assert main(["budgets", "set", "--tag", "feature=search", "--usd", "5", "--period", "day"]) == 0
    assert "on requests tagged 'feature=search'" in capsys.readouterr().out
    scopes = {(b.scope, b.scope_value) for b in load_budgets(ledger_env)}
    assert scopes == {(BudgetScope.EACH_USER, "shop"), (BudgetScope.TAG, "feature=search")}
    assert main(["budgets", "list"]) == 0
    listing = capsys.readouterr().out
    assert "each_user:shop" in listing and "tag:feature=search" in listing
    assert "0/0 end users" in listing
    assert main(["budgets", "status", *each]) == 0
    status = capsys.readouterr().out
    assert "end users who spent: 0; at or over the limit: 0" in status
    assert main(["budgets", "status", "--tag", "feature=search"]) == 0
    assert "remaining $5" in capsys.readouterr().out
    assert main(["budgets", "remove", *each]) == 0
    assert main(["budgets", "remove", "--tag", "feature=search"]) == 0
    assert load_budgets(ledger_env) == []
    assert main(["budgets", "status", *each]) == 1
    assert (
        main(["budgets", "set", "--team", "t", "--each-user", "--usd", "1", "--period", "day"]) == 2
    )

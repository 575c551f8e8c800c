"""`costgate migrate`, `keys` and `prices sync` against the test database."""

from __future__ import annotations

import pytest

from db.keys import hash_key, load_active_keys
from gateway.cli.main import main


@pytest.fixture
def ledger_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_URL", database_url)
    return database_url


@pytest.mark.usefixtures("clean_ledger")
def test_keys_create_prints_the_key_once_and_list_never_shows_it(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "create", "--app", "checkout", "--team", "payments"]) == 0
    out, err = capsys.readouterr()
    key = out.strip()
    assert key.startswith("cg-") and "shown once" in err
    assert load_active_keys(ledger_env)[hash_key(key)].app == "checkout"

    assert main(["keys", "list"]) == 0
    listing = capsys.readouterr().out
    assert "checkout" in listing and "payments" in listing and key not in listing
    assert key[:9] in listing  # the prefix, to tell keys apart


@pytest.mark.usefixtures("clean_ledger")
def test_keys_revoke_by_id_prefix_and_unknown_id_fails(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["keys", "create", "--app", "search"])
    key = capsys.readouterr().out.strip()
    key_id = next(iter(load_active_keys(ledger_env).values())).key_id
    assert main(["keys", "revoke", str(key_id)[:8]]) == 0
    assert hash_key(key) not in load_active_keys(ledger_env)
    assert main(["keys", "revoke", "ffffffff-ffff"]) == 1
    assert "no key" in capsys.readouterr().err


def test_migrate_reports_the_revision_and_syncs_prices(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate"]) == 0
    out = capsys.readouterr().out
    assert "database at revision 0001" in out
    assert "12 in the config" in out
    assert main(["prices", "sync"]) == 0
    assert "0 new price versions" in capsys.readouterr().out

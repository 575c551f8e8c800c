"""`costgate users forget` end to end: the id as the application sends it, hashed when
the config says so, erased from the ledger; nothing secret printed; bad input refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sqlalchemy import Engine, text

from gateway.attribution.identity import EndUserIds
from gateway.cli.main import main
from gateway.domain.config import default_config_path
from tests.db.test_end_users import seed_records, write_records

SECRET_ENV = "CG_TEST_FORGET_KEY"
SECRET = "forget-test-secret-6b1f"


@pytest.fixture
def ledger(database_url: str, ledger_engine: Engine, clean_ledger: None,
           monkeypatch: pytest.MonkeyPatch) -> Engine:  # fmt: skip
    monkeypatch.setenv("DATABASE_URL", database_url)
    with ledger_engine.begin() as conn:
        conn.execute(text("TRUNCATE end_user_erasures RESTART IDENTITY"))
    return ledger_engine


def _config(tmp_path: Path, hashed: bool) -> str:
    config = yaml.safe_load(Path(default_config_path()).read_text())
    if hashed:
        config["ledger"] = {"end_user_hash": "hmac", "end_user_hash_key_env": SECRET_ENV}
    path = tmp_path / "costgate.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _count(engine: Engine, sql: str, **params: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql), params).scalar_one())


def _named(engine: Engine, stored: str) -> int:
    return sum(
        _count(engine, f"SELECT count(*) FROM {t} WHERE end_user = :u", u=stored)
        for t in ("usage_records", "usage_rollup_user_daily", "usage_rollup_session_daily")
    )


@pytest.mark.parametrize("hashed", [False, True], ids=["plain", "hmac"])
def test_forget_erases_the_id_the_application_sent_and_prints_only_counts(
    ledger: Engine, database_url: str, tmp_path: Path, hashed: bool,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv(SECRET_ENV, SECRET)
    ids = EndUserIds(SECRET.encode()) if hashed else EndUserIds()
    write_records(database_url, seed_records(ids))
    alice, bob = ids.stored("alice"), ids.stored("bob")
    assert _named(ledger, alice) > 24 and (alice != "alice") == hashed
    bob_before = _named(ledger, bob)

    args = ["users", "forget", "alice", "--actor", "dpo", "--config", _config(tmp_path, hashed)]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "erasure 1: 24 ledger rows" in out and "forgotten:" in out and err == ""
    assert SECRET not in out + err and alice.removeprefix("hmac:") not in out + err
    assert _named(ledger, alice) == 0 and _named(ledger, bob) == bob_before
    assert _count(ledger, "SELECT count(*) FROM end_user_erasures WHERE actor = 'dpo'") == 1


def test_forget_with_hashing_on_and_its_secret_unset_names_the_variable_and_changes_nothing(
    ledger: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.delenv(SECRET_ENV, raising=False)
    assert main(["users", "forget", "alice", "--config", _config(tmp_path, True)]) == 2
    err = capsys.readouterr().err
    assert SECRET_ENV in err and "not set" in err and "Traceback" not in err
    assert _count(ledger, "SELECT count(*) FROM end_user_erasures") == 0


def test_forget_of_an_id_no_row_carries_warns_but_is_audited(
    ledger: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["users", "forget", "nobody", "--config", _config(tmp_path, False)]) == 0
    out, err = capsys.readouterr()
    assert "0 ledger rows" in out and "warning: no row named this end user" in err
    assert "nobody" not in out + err
    assert _count(ledger, "SELECT count(*) FROM end_user_erasures") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["users", "forget", ""], "must not be empty"),
        (["users", "forget", "x" * 257], "at most 256"),
        (["users", "forget", "a\tb"], "printable"),
        (["users", "forget", "alice", "--actor", " "], "--actor must not be empty"),
    ],
)
def test_forget_refuses_an_id_no_request_could_carry_and_an_empty_actor(
    ledger: Engine, tmp_path: Path, argv: list[str], message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    try:
        status = main([*argv, "--config", _config(tmp_path, False)])
    except SystemExit as exit_:  # argparse's refusal
        status = int(exit_.code or 0)
    assert status == 2 and message in capsys.readouterr().err
    assert _count(ledger, "SELECT count(*) FROM end_user_erasures") == 0

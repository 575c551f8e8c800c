"""`costgate migrate`, `keys` and `prices sync` against the test database."""

from __future__ import annotations

import datetime as dt

import pytest

from db.keys import hash_key, load_active_keys
from db.migrate import head_revision
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
@pytest.mark.parametrize("app", ["default", "anonymous", " default "])
def test_keys_create_refuses_the_reserved_app_names(
    ledger_env: str, capsys: pytest.CaptureFixture[str], app: str
) -> None:
    assert main(["keys", "create", "--app", app]) == 2
    out, err = capsys.readouterr()
    assert not out and "is reserved" in err
    assert load_active_keys(ledger_env) == {}


def test_the_reserved_app_names_are_the_gateways_keyless_apps() -> None:
    from db.keys import RESERVED_APPS
    from gateway.replica.auth import ANONYMOUS_APP, STATIC_APP

    assert {ANONYMOUS_APP, STATIC_APP} == RESERVED_APPS


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


@pytest.mark.usefixtures("clean_ledger")
def test_keys_create_stores_a_scope_and_list_shows_it(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["keys", "create", "--app", "bot", "--models", "fast, gpt-4.1", "--max-n", "2",
            "--max-output-tokens", "100", "--expires", "2099-01-01"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    info = load_active_keys(ledger_env)[hash_key(out.strip())]
    assert info.allowed_models == ("fast", "gpt-4.1") and (info.max_n, info.max_output_tokens) == (
        2, 100)
    assert info.expires_at == dt.datetime(2099, 1, 1, tzinfo=dt.UTC) and not info.is_admin
    assert "warning" not in err and "models fast,gpt-4.1" in err
    assert main(["keys", "create", "--app", "ops", "--admin"]) == 0
    admin = capsys.readouterr().out.strip()
    assert load_active_keys(ledger_env)[hash_key(admin)].is_admin

    assert main(["keys", "list"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split()[-2:] == ["ADMIN", "SCOPE"]
    bot = next(line for line in listing if " bot " in line)
    assert "models fast,gpt-4.1 n<=2 output<=100 expires 2099-01-01 00:00" in bot
    ops = next(line for line in listing if " ops " in line)
    assert " yes " in ops and ops.endswith("any model")


@pytest.mark.usefixtures("clean_ledger")
def test_keys_create_refuses_a_dead_scope_and_warns_of_unknown_models(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for bad in (["--expires", "2001-01-01"], ["--expires", "soon"], ["--max-n", "0"],
                ["--models", " , "]):
        with pytest.raises(SystemExit) as info:
            main(["keys", "create", "--app", "bot", *bad])
        assert info.value.code == 2, bad
    assert "not in the future" in capsys.readouterr().err
    assert load_active_keys(ledger_env) == {}
    assert main(["keys", "create", "--app", "bot", "--models", "fast,gpt-9"]) == 0
    assert "warning: not in the config: gpt-9" in capsys.readouterr().err


@pytest.mark.usefixtures("clean_ledger")
def test_keys_create_stores_default_tags_allowed_tag_keys_and_user_limits(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["keys", "create", "--app", "assistant", "--tag", "env=prod", "--tag", " team = ml ",
            "--allow-tag-key", "feature", "--allow-tag-key", "tenant", "--user-rpm", "30",
            "--user-tpm", "20000"]  # fmt: skip
    assert main(args) == 0
    out, err = capsys.readouterr()
    info = load_active_keys(ledger_env)[hash_key(out.strip())]
    assert info.default_tags == {"env": "prod", "team": "ml"}
    assert info.allowed_tag_keys == ("feature", "tenant")
    assert (info.user_rpm_limit, info.user_tpm_limit) == (30, 20000)
    scope = "tags env=prod,team=ml tag keys feature,tenant user rpm 30 user tpm 20000"
    assert scope in err

    assert main(["keys", "list"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if " assistant " in x]
    assert line.endswith("any model " + scope)


@pytest.mark.usefixtures("clean_ledger")
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["--tag", "env"], "a tag is KEY=VALUE"),
        (["--tag", "=prod"], "a tag is KEY=VALUE"),
        (["--tag", "k" * 65 + "=v"], "at most 64"),
        (["--tag", "env=" + "v" * 513], "at most 512"),
        (["--tag", "env=a", "--tag", "env=b"], "a tag key is given twice"),
        (["--allow-tag-key", ""], "must not be empty"),
        (["--user-rpm", "0"], "must be at least 1"),
        (["--user-tpm", "many"], "not a whole number"),
    ],
)
def test_keys_create_refuses_tags_and_user_limits_out_of_bounds(
    ledger_env: str, capsys: pytest.CaptureFixture[str], bad: list[str], message: str
) -> None:
    try:
        status = main(["keys", "create", "--app", "bot", *bad])
    except SystemExit as exit_:  # argparse's refusal
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert status == 2 and message in err and "Traceback" not in err
    assert out == "" and load_active_keys(ledger_env) == {}  # no key was made, none shown


def test_migrate_reports_the_revision_and_syncs_prices(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate"]) == 0
    out = capsys.readouterr().out
    assert f"database at revision {head_revision()}" in out
    assert "13 in the config" in out
    assert main(["prices", "sync"]) == 0
    assert "0 new price versions" in capsys.readouterr().out


def test_ledger_partitions_creates_the_weeks_ahead_and_from_a_date(
    ledger_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from db.partitions.sql import week_name

    monday = dt.date(2026, 9, 7)
    assert main(["ledger", "partitions", "--since", "2026-09-09"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("created ")
    assert main(["ledger", "partitions", "--since", "2026-09-09"]) == 0  # nothing left to do
    assert capsys.readouterr().out.startswith("created 0 partitions")
    from db.engine import make_engine
    from db.partitions.maintenance import partitions

    engine = make_engine(ledger_env)
    try:
        assert week_name(monday) in partitions(engine)
    finally:
        engine.dispose()

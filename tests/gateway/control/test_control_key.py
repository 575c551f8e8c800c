"""The control plane's admin key: created once by `up`/`demo`, kept 600 under the state
dir, replaced when it stops working, and read back as the default for routing changes."""

from __future__ import annotations

import stat

import pytest

from db.keys import hash_key, list_keys, load_active_keys, revoke_key
from gateway.control.control_key import CONTROL_APP, ensure_control_key
from gateway.domain.environment import environment

pytestmark = pytest.mark.usefixtures("clean_ledger")


@pytest.fixture
def state(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COSTGATE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("COSTGATE_ADMIN_KEY", raising=False)
    return tmp_path / "state"


def test_a_new_admin_key_is_written_600_and_read_back_by_the_environment(database_url, state):
    path = ensure_control_key(database_url, state)
    assert path == state / "admin_key" == environment().admin_key_file
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_text()
    info = load_active_keys(database_url)[hash_key(key)]
    assert info.is_admin and info.app == CONTROL_APP
    assert environment().control_admin_key() == key
    assert list(state.iterdir()) == [path]  # no temporary file left behind


def test_a_working_key_is_kept_and_a_revoked_one_replaced(database_url, state):
    first = ensure_control_key(database_url, state).read_text()
    assert ensure_control_key(database_url, state).read_text() == first
    assert len(list_keys(database_url)) == 1
    revoke_key(database_url, str(load_active_keys(database_url)[hash_key(first)].key_id))
    second = ensure_control_key(database_url, state).read_text()
    assert second != first and load_active_keys(database_url)[hash_key(second)].is_admin


def test_a_kept_key_that_is_not_an_admin_key_is_replaced(database_url, state):
    from db.keys import create_key

    app_key, _ = create_key(database_url, "someone")
    state.mkdir(parents=True)
    (state / "admin_key").write_text(app_key)
    replaced = ensure_control_key(database_url, state).read_text()
    assert replaced != app_key and load_active_keys(database_url)[hash_key(replaced)].is_admin


def test_an_operators_key_in_the_environment_is_used_and_nothing_is_created(
    database_url, state, monkeypatch
):
    monkeypatch.setenv("COSTGATE_ADMIN_KEY", " cg-operators-admin-key ")
    assert ensure_control_key(database_url, state) is None
    assert list_keys(database_url) == [] and not state.exists()
    assert environment().control_admin_key() == "cg-operators-admin-key"
    assert "cg-operators" not in repr(environment())  # a SecretStr


def test_no_key_anywhere_is_none(state):
    assert environment().control_admin_key() is None

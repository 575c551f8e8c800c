"""The gateway keys' local cache: what a replica that starts during an outage starts from."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
import uuid

from db.key_cache import KeyCache, decode_keys, encode_keys
from db.keys import KeyInfo, hash_key

KEYS = {
    hash_key("cg-alice"): KeyInfo(uuid.uuid4(), "alice-app", "a", ("fast", "gpt-4.1"), 2, 512,
                                  dt.datetime(2031, 1, 2, 3, 4, tzinfo=dt.UTC), False),
    hash_key("cg-ops"): KeyInfo(uuid.uuid4(), "ops", None, is_admin=True),
    hash_key("cg-bot"): KeyInfo(uuid.uuid4(), "bot", None, default_tags={"env": "prod"},
                                allowed_tag_keys=("feature",), user_rpm_limit=3,
                                user_tpm_limit=900),
}  # fmt: skip


def test_a_key_set_comes_back_exactly_as_it_was_saved(tmp_path):
    cache = KeyCache(tmp_path / "state" / "keys.json")
    assert cache.load() is None  # nothing saved yet
    cache.save(KEYS)
    assert cache.load() == KEYS
    assert stat.S_IMODE((tmp_path / "state" / "keys.json").stat().st_mode) == 0o600
    text = (tmp_path / "state" / "keys.json").read_text()
    assert "cg-alice" not in text and hash_key("cg-alice") in text  # hashes, never keys


def test_an_unchanged_set_is_not_written_again_and_a_changed_one_is(tmp_path):
    path = tmp_path / "keys.json"
    cache = KeyCache(path)
    cache.save(KEYS)
    path.write_bytes(b"tampered")  # would be overwritten by a second write
    cache.save(dict(KEYS))
    assert path.read_bytes() == b"tampered"
    fewer = dict(list(KEYS.items())[:1])
    cache.save(fewer)
    assert KeyCache(path).load() == fewer


def test_a_file_that_is_not_a_key_set_reads_as_none(tmp_path):
    path = tmp_path / "keys.json"
    for junk in (b"", b"{", b"[]", b'{"version": 99, "keys": {}}', b'{"version": 1}',
                 b'{"version": 1, "keys": {"h": {"app": "x"}}}'):  # fmt: skip
        path.write_bytes(junk)
        assert KeyCache(path).load() is None, junk


def test_a_field_the_cache_has_and_the_code_no_longer_knows_is_ignored():
    doc = json.loads(encode_keys(KEYS))
    for row in doc["keys"].values():
        row["retired_field"] = 1
    assert decode_keys(json.dumps(doc).encode()) == KEYS


def test_an_unwritable_state_dir_is_only_a_warning(tmp_path, caplog):
    (tmp_path / "state").write_text("a file where the directory should be")
    KeyCache(tmp_path / "state" / "keys.json").save(KEYS)
    assert "cannot keep the gateway keys' cache" in caplog.text


def test_a_replica_takes_the_file_only_when_it_is_newer_than_its_own_last_load(tmp_path):
    path = tmp_path / "keys.json"
    KeyCache(path).save(KEYS)
    written = path.stat().st_mtime
    reader = KeyCache(path)
    assert reader.load(newer_than=written + 1) is None  # we loaded after it was written
    assert reader.load(newer_than=written - 1) == KEYS  # another replica saw more since
    os.utime(path, (written - 10, written - 10))
    assert reader.load(newer_than=written - 5) is None
    assert reader.load(newer_than=None) == KEYS  # at start: any set beats none

"""End-user ids as each role may see them."""

from __future__ import annotations

import pandas as pd

from dashboard.access.end_users import HIDDEN, IdView, present, pseudonym, view_for


def test_roles_see_ids_pseudonyms_or_nothing():
    assert view_for("finance") is view_for("admin") is IdView.CLEAR
    assert view_for("ops") is IdView.PSEUDONYM
    assert view_for("viewer") is view_for("nobody") is IdView.NONE


def test_a_pseudonym_is_stable_short_and_differs_per_deployment():
    a = pseudonym("alice@example.com", b"k1" * 16)
    assert a == pseudonym("alice@example.com", b"k1" * 16)
    assert a != pseudonym("alice@example.com", b"k2" * 16)
    assert a != pseudonym("bob@example.com", b"k1" * 16)
    assert a.startswith("user-") and len(a) == len("user-") + 12 and "alice" not in a


def test_present_replaces_the_column_on_a_copy():
    frame = pd.DataFrame({"end_user": ["alice", None], "spend": [1, 2]})
    key = b"k" * 32
    assert present(frame, IdView.CLEAR, key) is frame
    shown = present(frame, IdView.PSEUDONYM, key)
    assert list(shown["end_user"]) == [pseudonym("alice", key), None]
    assert list(present(frame, IdView.NONE, key)["end_user"]) == [HIDDEN, None]
    assert frame["end_user"].iloc[0] == "alice"  # the caller's frame is left alone

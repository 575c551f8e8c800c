from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pytest

from dashboard.routing_editor import history_frame, propose_change, weights_frame
from gateway.domain.config import default_config_path, load_config
from gateway.domain.routing_settings import RoutingError, routing_from_config

CFG = load_config(default_config_path())
SETTINGS = routing_from_config(CFG)


def edited(**weights):
    return pd.DataFrame({"model": list(weights), "weight": list(weights.values())})


def test_weights_frame_shows_shares_per_alias():
    frame = weights_frame(SETTINGS, CFG, "auto").set_index("model")
    assert frame.loc["deepseek-v3.2", "share_pct"] == 60.0
    assert set(weights_frame(SETTINGS, CFG)["alias"]) == set(CFG.aliases)


def test_an_edit_becomes_a_validated_change():
    change = propose_change(
        SETTINGS,
        CFG,
        "auto",
        edited(**{"deepseek-v3.2": 0.0, "gemini-2.5-flash": 0.0, "claude-sonnet-4.5": 100.0}),
    )
    assert change.after == {
        "deepseek-v3.2": 0,
        "gemini-2.5-flash": 0,
        "claude-sonnet-4.5": Decimal(100),
    }
    assert change.before["deepseek-v3.2"] == 60
    assert "claude-sonnet-4.5=100" in change.after_text()
    assert change.diff_frame().set_index("model")["after"].to_dict() == {
        "deepseek-v3.2": "0",
        "gemini-2.5-flash": "0",
        "claude-sonnet-4.5": "100",
    }


@pytest.mark.parametrize(
    "weights, message",
    [
        ({"deepseek-v3.2": -1.0, "gemini-2.5-flash": 30.0, "claude-sonnet-4.5": 10.0}, "negative"),
        (
            {"deepseek-v3.2": 0.0, "gemini-2.5-flash": 0.0, "claude-sonnet-4.5": 0.0},
            "every weight is 0",
        ),
        ({"deepseek-v3.2": 60.0, "gemini-2.5-flash": 30.0, "claude-sonnet-4.5": 10.0}, "unchanged"),
        ({"deepseek-v3.2": None, "gemini-2.5-flash": 30.0, "claude-sonnet-4.5": 10.0}, "required"),
        ({"no-such-model": 5.0}, "unknown model"),
    ],
)
def test_invalid_edits_are_refused_before_the_confirm_step(weights, message):
    with pytest.raises(RoutingError, match=message):
        propose_change(SETTINGS, CFG, "auto", edited(**weights))


def test_history_shows_before_and_after_weights():
    changes = pd.DataFrame(
        {
            "changed_at": pd.to_datetime(["2026-11-29T10:00:00Z"]),
            "actor": ["alice"],
            "alias": ["auto"],
            "before": [{"deepseek-v3.2": "60"}],
            "after": [{"deepseek-v3.2": "0", "claude-sonnet-4.5": "100"}],
            "note": [None],
        }
    )
    row = history_frame(changes).iloc[0]
    assert row["who"] == "alice" and row["when (UTC)"] == "2026-11-29 10:00:00"
    assert row["after"] == "deepseek-v3.2=0, claude-sonnet-4.5=100"
    assert history_frame(pd.DataFrame()).empty

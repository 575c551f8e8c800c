"""Error rates and failures by class, from the cube."""

from __future__ import annotations

from dashboard.cube import records_to_cube
from dashboard.failures import error_rates, errors_by_class
from tests.dashboard.support.records import failed, frame, record


def test_error_rates_by_provider_and_class():
    recs = [record(), record(), failed(), failed(provider="openai", model="gpt-4.1")]
    cube = records_to_cube(frame(recs), "day")
    rates = error_rates(cube, "provider").set_index("provider")
    assert rates.loc["deepseek", "error_rate_pct"] == round(100 / 3, 2)
    assert rates.loc["openai", "error_rate_pct"] == 100.0
    classes = errors_by_class(cube)
    assert classes["requests"].sum() == 2
    assert set(classes["error_class"]) == {"upstream_5xx"}

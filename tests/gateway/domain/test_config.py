"""The YAML config: the example loads, and bad files name the key path and the value."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from gateway.domain.config import ConfigError, default_config_path, load_config, parse_config

EXAMPLE = yaml.safe_load(Path(default_config_path()).read_text())


def broken(change) -> dict:
    data = copy.deepcopy(EXAMPLE)
    change(data)
    return data


def test_the_example_config_loads_with_the_seeds_mix():
    cfg = load_config(default_config_path())
    auto = cfg.aliases["auto"]
    assert {k: int(v) for k, v in auto.candidates.items()} == {
        "deepseek-v3.2": 60, "gemini-2.5-flash": 30, "claude-sonnet-4.5": 10}
    assert auto.baseline == "gpt-4.1"
    assert set(cfg.aliases) >= {"auto", "fast", "balanced", "budget", "code"}
    relay = cfg.provider("relay").billing
    assert relay.currency == "CNY" and str(relay.fx_per_usd) == "7.3"
    assert cfg.gateway.ray.head_port != 6379


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["models"][0].update(provider="nowhere"),
         "models.0.provider: unknown provider 'nowhere'"),
        (lambda d: d["aliases"]["auto"]["candidates"].update({"gpt-9": 5}),
         "aliases.auto.candidates.gpt-9: unknown model 'gpt-9'"),
        (lambda d: d["aliases"]["auto"]["candidates"].update({"deepseek-v3.2": -1}),
         "aliases.auto.candidates.deepseek-v3.2"),
        (lambda d: d["models"][1]["list_prices"].update(output="lots"),
         "models.1.list_prices.output"),
        (lambda d: d["gateway"].update(port=70000), "gateway.port"),
        (lambda d: d["gateway"]["ray"].update(dashboard_port=6380),
         "dashboard_port and head_port are both 6380"),
        (lambda d: d["providers"][0].update(base_url="ftp://x"), "providers.0.base_url"),
        (lambda d: d["providers"][0].update(api_key_env="sk-live-123"),
         "providers.0.api_key_env"),
        (lambda d: d["gateway"].update(num_replica=3), "gateway.num_replica: Extra inputs"),
        (lambda d: d["models"].append(dict(d["models"][0])), "duplicate name 'gpt-4.1'"),
        (lambda d: d["aliases"]["fast"].update(baseline="gpt-0"),
         "aliases.fast.baseline: unknown model 'gpt-0'"),
    ],
)
def test_a_bad_file_names_the_key_path(change, expected):
    with pytest.raises(ConfigError) as info:
        parse_config(broken(change))
    assert expected in str(info.value)


def test_the_offending_value_is_shown():
    with pytest.raises(ConfigError) as info:
        parse_config(broken(lambda d: d["gateway"].update(max_ongoing_requests="many")))
    assert "gateway.max_ongoing_requests" in str(info.value) and "'many'" in str(info.value)


def test_unreadable_and_non_yaml_files_fail_clearly(tmp_path):
    with pytest.raises(ConfigError, match="cannot read configuration"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("providers: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(bad)


def test_a_provider_key_is_read_from_the_named_variable_only(monkeypatch):
    cfg = load_config(default_config_path())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert cfg.provider("openai").api_key() == "sk-from-env"
    assert "sk-from-env" not in repr(cfg)

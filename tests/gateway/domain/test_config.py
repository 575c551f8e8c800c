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


def test_keys_are_required_by_default_and_in_the_shipped_configs():
    assert load_config(default_config_path()).gateway.require_keys
    container = Path(default_config_path()).parents[1] / "deploy" / "config" / "costgate.yaml"
    assert load_config(container).gateway.require_keys
    no_gateway = broken(lambda d: d.pop("gateway"))
    assert parse_config(no_gateway).gateway.require_keys


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.7", "gateway.internal"])
def test_keys_off_on_a_reachable_address_is_refused_with_the_key_path(host):
    with pytest.raises(ConfigError) as info:
        parse_config(broken(lambda d: d["gateway"].update(host=host, require_keys=False)))
    message = str(info.value)
    assert "gateway.require_keys: false with gateway.host" in message and host in message
    assert "gateway.allow_anonymous: true" in message


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_keys_off_on_loopback_needs_no_confirmation(host):
    cfg = parse_config(broken(lambda d: d["gateway"].update(host=host, require_keys=False)))
    assert not cfg.gateway.require_keys and not cfg.gateway.allow_anonymous


def test_allow_anonymous_lets_keys_off_bind_any_address_and_means_nothing_with_keys_on():
    cfg = parse_config(broken(lambda d: d["gateway"].update(
        host="0.0.0.0", require_keys=False, allow_anonymous=True)))
    assert cfg.gateway.allow_anonymous and not cfg.gateway.require_keys
    with pytest.raises(ConfigError, match="gateway.allow_anonymous: true has no effect"):
        parse_config(broken(lambda d: d["gateway"].update(allow_anonymous=True)))


def test_the_metrics_token_is_named_by_its_variable_never_given():
    cfg = parse_config(broken(lambda d: d["gateway"].update(metrics_token_env="METRICS_TOKEN")))
    assert cfg.gateway.metrics_token_env == "METRICS_TOKEN"


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda d: d["gateway"].update(metrics_token_env="s3cr3t-value"),
         "gateway.metrics_token_env"),
        (lambda d: d["providers"][0].update(api_key_env="sk-s3cr3t-value"),
         "providers.0.api_key_env"),
    ],
)
def test_a_secret_pasted_where_its_variable_belongs_is_not_echoed(change, path):
    with pytest.raises(ConfigError) as info:
        parse_config(broken(change))
    assert path in str(info.value) and "s3cr3t" not in str(info.value)


def test_each_head_gets_its_own_replica_port_range_clear_of_workers_and_ephemeral_ports():
    from gateway.domain.ray_options import REPLICA_PORTS, RayOptions

    ranges = {}
    # the default, the chaos stacks' heads and the test sessions' heads
    for head in [6380, *range(15005, 17906, 100), *range(18010, 18911, 100)]:
        first, last = RayOptions(head_port=head).replica_ports()
        assert first >= 30000 and last < 32768 and last - first + 1 == REPLICA_PORTS
        ranges[head] = first
    tests = {ranges[h] for h in range(18010, 18911, 100)}
    chaos = {ranges[h] for h in range(15005, 17906, 100)}
    assert len(tests) == 10 and len(chaos) == 30 and not tests & chaos
    assert RayOptions(replica_port_min=41000).replica_ports() == (41000, 41000 + REPLICA_PORTS - 1)
    with pytest.raises(ValueError):
        RayOptions(replica_port_min=80)


def test_the_fallback_proxy_ports_follow_the_head_port_and_must_not_collide():
    from gateway.domain.ray_options import RayOptions

    ports = RayOptions(head_port=18010).ports()
    assert (ports["fallback_proxy_port"], ports["fallback_grpc_port"]) == (18017, 18018)
    with pytest.raises(ValueError, match="both 18015"):
        RayOptions(head_port=18010, dashboard_port=18015, fallback_proxy_port=18015)


def test_an_alias_cannot_mix_chat_and_embedding_models():
    def change(d):
        d["aliases"]["fast"]["candidates"]["text-embedding-3-small"] = 5

    with pytest.raises(ConfigError, match="aliases.fast: mixes chat and embedding models"):
        parse_config(broken(change))


def test_a_fallback_must_be_a_model_of_the_same_kind():
    def change(d):
        d["models"][0]["fallbacks"] = ["text-embedding-3-small"]

    with pytest.raises(ConfigError, match="'text-embedding-3-small' is a embedding model"):
        parse_config(broken(change))


def test_replicas_reload_fx_rates_every_minute_unless_configured():
    data = load_config(default_config_path()).model_dump(mode="json")
    assert parse_config(data).ledger.fx_refresh_s == 60.0
    data["ledger"]["fx_refresh_s"] = 5
    assert parse_config(data).ledger.fx_refresh_s == 5.0
    data["ledger"]["fx_refresh_s"] = 0
    with pytest.raises(ConfigError, match="ledger.fx_refresh_s"):
        parse_config(data)

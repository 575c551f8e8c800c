import pytest

from gateway.devtools.sim.main import main as sim_main
from gateway.devtools.sim.settings import parse_sim_settings, served_models
from gateway.domain.config import ConfigError, load_config
from tests.fixtures.sim import EXAMPLE_CONFIG


def test_example_config_sim_section_is_valid_and_merges_per_model_figures():
    config = load_config(EXAMPLE_CONFIG)
    settings = parse_sim_settings(config.sim)
    claude = settings.behaviour("claude-sonnet-4-5")
    assert claude.ttft_ms == 250
    assert claude.per_token_ms == 8
    assert claude.completion_tokens == settings.default.completion_tokens
    assert settings.behaviour("unlisted-model") == settings.default


def test_served_models_are_the_upstream_ids_of_the_config():
    config = load_config(EXAMPLE_CONFIG)
    served = served_models(config, parse_sim_settings(config.sim))
    assert "deepseek-chat" in served and "claude-sonnet-4-5" in served
    assert "deepseek-v3.2" not in served  # a public name, not an upstream id
    assert len(served) == len(set(served))


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ({"models": {"gpt-4.1": {"ttft_ms": -5}}}, "sim.models.gpt-4.1.ttft_ms"),
        ({"default": {"completion_tokens": [50, 10]}}, "sim.default"),
        ({"default": {"jitter": 3}}, "sim.default.jitter"),
        ({"faults": {"deepseek-chat": {"explode": {"probability": 1}}}},
         "sim.faults.deepseek-chat.explode"),
        ({"faults": {"gpt-4.1": {"error_503": {"probability": 1.5}}}},
         "sim.faults.gpt-4.1.error_503.probability"),
        ({"defaults": {}}, "sim.defaults"),
        ({"port": 0}, "sim.port"),
    ],
)
def test_invalid_sim_section_names_the_key_path(section, path):
    with pytest.raises(ConfigError) as err:
        parse_sim_settings(section)
    assert path in str(err.value)


def test_sim_command_refuses_a_bad_config_with_the_key_path(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        EXAMPLE_CONFIG.read_text().replace("ttft_ms: 180", "ttft_ms: fast")
    )
    assert sim_main(["--config", str(bad)]) == 2
    assert "sim.models.deepseek-chat.ttft_ms" in capsys.readouterr().err

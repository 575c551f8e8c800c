import yaml

from gateway.domain.config import load_config
from tests.deploy.repo_files import CONTAINER_CONFIG, EXAMPLE_CONFIG


def test_the_container_config_is_the_example_with_container_addresses_only():
    example = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    container = yaml.safe_load(CONTAINER_CONFIG.read_text())
    assert container["gateway"]["host"] == "0.0.0.0"
    assert container["sim"]["host"] == "0.0.0.0"
    for provider in container["providers"]:
        assert provider["base_url"].startswith("http://sim:9100/")
    # put the container's differences back: what is left must be the example itself
    container["gateway"]["host"] = example["gateway"]["host"]
    # beyond loopback /metrics wants a token; the example binds loopback
    assert container["gateway"].pop("metrics_token_env") == "COSTGATE_METRICS_TOKEN"
    assert "metrics_token_env" not in example["gateway"]
    container["sim"]["host"] = example["sim"]["host"]
    for mine, theirs in zip(container["providers"], example["providers"], strict=True):
        mine["base_url"] = mine["base_url"].replace("http://sim:9100/", "http://127.0.0.1:9100/")
        assert mine == theirs
    assert container == example


def test_the_container_config_is_valid():
    cfg = load_config(CONTAINER_CONFIG)
    assert cfg.gateway.num_replicas >= 2

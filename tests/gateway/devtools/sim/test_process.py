"""Starting the sim as a child process, as the fixture and the demo do."""

import socket

import httpx
import pytest
import yaml

from gateway.devtools.sim.process import SimProcess, SimStartError
from tests.fixtures.sim import EXAMPLE_CONFIG

PORTS = range(19190, 19195)


@pytest.fixture
def config_with_faults(tmp_path):
    config = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    config["sim"]["faults"] = {"gpt-4.1": {"error_502": {"probability": 1.0, "count": 1}}}
    path = tmp_path / "costgate.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_sim_process_skips_a_taken_port_and_applies_the_files_faults(config_with_faults):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", PORTS[0]))
        squatter.listen()
        sim = SimProcess.start(config_with_faults, PORTS)
    try:
        assert sim.port != PORTS[0]
        url = sim.provider_url("openai") + "/chat/completions"
        body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 1}
        assert [httpx.post(url, json=body).status_code for _ in range(2)] == [502, 200]
        sim.reset()  # back to the file's faults, count included
        assert httpx.post(url, json=body).status_code == 502
    finally:
        sim.stop()
    assert sim.process.returncode is not None


def test_sim_process_with_a_bad_config_fails_to_start(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE_CONFIG.read_text().replace("jitter: 0.2", "jitter: 5"))
    with pytest.raises(SimStartError, match="exited with 2"):
        SimProcess.start(bad, range(PORTS[-1], PORTS[-1] + 1), timeout_s=20)

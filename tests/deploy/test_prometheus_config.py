import subprocess

from tests.deploy.repo_files import PROMETHEUS


def test_promtool_accepts_the_compose_prometheus_config():
    result = subprocess.run(
        ["promtool", "check", "config", str(PROMETHEUS)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout

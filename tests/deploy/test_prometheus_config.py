import subprocess

from tests.deploy.repo_files import checkable_prometheus_config


def test_promtool_accepts_the_compose_prometheus_config(tmp_path):
    checked = checkable_prometheus_config(tmp_path)
    result = subprocess.run(
        ["promtool", "check", "config", str(checked)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout

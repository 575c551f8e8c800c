"""`costgate up` when PostgreSQL cannot be reached: a first start is refused, clearly."""

from __future__ import annotations

import socket
from pathlib import Path

import yaml

from gateway.cli.main import main
from gateway.domain.config import default_config_path


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_up_without_a_database_and_without_a_running_gateway_says_why(
    tmp_path, monkeypatch, capsys
) -> None:
    config = yaml.safe_load(Path(default_config_path()).read_text())
    config["gateway"]["ray"]["dashboard_port"] = _closed_port()  # no Serve to redeploy
    path = tmp_path / "costgate.yaml"
    path.write_text(yaml.safe_dump(config))
    secret = "s3cr3t-pw"
    monkeypatch.setenv("DATABASE_URL", f"postgresql://u:{secret}@127.0.0.1:{_closed_port()}/x")
    monkeypatch.setenv("COSTGATE_STATE_DIR", str(tmp_path / "state"))
    assert main(["up", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    assert "PostgreSQL unreachable" in err and "nothing to redeploy" in err
    assert secret not in err and "Traceback" not in err

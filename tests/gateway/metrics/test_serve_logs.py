"""Our warnings reach a replica's log file at once, with Serve's own logger set up by
Serve's own function as in a throughput-optimized replica (a 1,000-record buffer, stderr
redirected into it)."""

from __future__ import annotations

import builtins
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray.serve._private.common import ServeComponentType
from ray.serve._private.logging_utils import configure_component_logger
from ray.serve.schema import LoggingConfig

from gateway.metrics import serve_logs


@pytest.fixture
def replica_log(tmp_path: Path) -> Iterator[Path]:
    saved = sys.stdout, sys.stderr, builtins.print
    try:
        configure_component_logger(
            component_name="Gateway", component_id="test",
            logging_config=LoggingConfig(logs_dir=str(tmp_path), log_level="INFO"),
            component_type=ServeComponentType.REPLICA, max_bytes=10**6, backup_count=1,
            buffer_size=1000,
        )  # fmt: skip
        yield next(tmp_path.glob("replica_*.log"))
    finally:
        sys.stdout, sys.stderr, builtins.print = saved
        serve = logging.getLogger(serve_logs.SERVE_LOGGER)
        for handler in serve.handlers:
            handler.close()
        serve.handlers.clear()
        for name in serve_logs.OURS:
            ours = logging.getLogger(name)
            ours.handlers = [h for h in ours.handlers if not isinstance(h, serve_logs.ToServe)]
            ours.propagate = True


def test_without_it_an_error_waits_in_serves_buffer(replica_log: Path) -> None:
    logging.getLogger("gateway.ledger.journal").error("usage journal stopped: disk full")
    assert "usage journal stopped" not in replica_log.read_text()


def test_a_warning_is_in_the_file_at_once_at_its_level(replica_log: Path) -> None:
    serve_logs.install()
    serve_logs.install()  # once per process, however often replicas construct
    handlers = logging.getLogger("gateway").handlers
    assert sum(isinstance(h, serve_logs.ToServe) for h in handlers) == 1
    logging.getLogger("gateway.ledger.writer").warning("usage records dropped: 7 rows held")
    logging.getLogger("costgate.ingress").info("below the level: not written")
    text = replica_log.read_text()
    assert "WARNING" in text and "usage records dropped: 7 rows held" in text
    assert "not written" not in text

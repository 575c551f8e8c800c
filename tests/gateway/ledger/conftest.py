"""The writer factory the writer's and the spool's tests share: every writer it makes is
closed after the test, so none outlives it and keeps a spool file open or marked live."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.ledger.writer import RecordWriter


@pytest.fixture
async def writer_factory(tmp_path: Path) -> AsyncIterator[Callable[..., RecordWriter]]:
    writers: list[RecordWriter] = []

    def make(url: str, **kwargs: Any) -> RecordWriter:
        kwargs.setdefault("spool_dir", tmp_path / "spool")
        kwargs.setdefault("flush_interval_s", 0.05)
        kwargs.setdefault("retry_max_s", 0.2)
        w = RecordWriter(url, **kwargs)
        writers.append(w)
        return w

    yield make
    for w in writers:
        await w.close(timeout_s=5)

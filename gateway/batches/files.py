"""The Files API's bytes on a local directory, one file per id, and their rows
(`db.batches.store`): a file belongs to the app that uploaded it (or whose batch wrote
it); any other app is told it does not exist."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import secrets
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from db.batches import store
from gateway.domain.openai_errors import OpenAIError


def new_file_id() -> str:
    return f"file-{secrets.token_hex(12)}"


def not_found(what: str, object_id: str) -> OpenAIError:
    return OpenAIError(404, f"No such {what}: {object_id[:80]!r}.", code="not_found",
                       param="id")  # fmt: skip


def file_object(row: dict[str, Any]) -> dict[str, Any]:
    """A file row as OpenAI's `file` object."""
    created: dt.datetime = row["created_at"]
    return {
        "id": row["id"], "object": "file", "bytes": int(row["bytes"]),
        "created_at": int(created.timestamp()), "filename": row["filename"],
        "purpose": row["purpose"], "status": "processed", "expires_at": None,
        "status_details": None,
    }


class FileStore:
    def __init__(self, engine: Engine, directory: Path) -> None:
        self.engine = engine
        self.directory = directory

    def _path(self, file_id: str) -> Path:
        # ids are ours (`file-` and hex): never a path a client chose
        if not file_id.startswith("file-") or not file_id[5:].isalnum():
            raise not_found("file", file_id)
        return self.directory / file_id

    def _write(self, file_id: str, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        part = self.directory / f".{file_id}.part"
        with open(part, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, self._path(file_id))  # whole or not at all

    def file_row(self, file_id: str, app: str, purpose: str, filename: str, data: bytes
                 ) -> dict[str, Any]:  # fmt: skip
        return {"id": file_id, "app": app, "purpose": purpose, "filename": filename[:255],
                "bytes": len(data), "created_at": dt.datetime.now(dt.UTC)}

    async def save(self, app: str, purpose: str, filename: str, data: bytes,
                   file_id: str | None = None) -> dict[str, Any]:  # fmt: skip
        """Write the bytes, then the row: a row never names a file that is not there."""
        row = self.file_row(file_id or new_file_id(), app, purpose, filename, data)
        await asyncio.to_thread(self._write, row["id"], data)
        await asyncio.to_thread(store.add_file, self.engine, row)
        return row

    def write_bytes(self, file_id: str, data: bytes) -> None:
        """A result file's bytes, before the transaction that adds its row."""
        self._write(file_id, data)

    async def find(self, app: str, file_id: str) -> dict[str, Any]:
        row = await asyncio.to_thread(store.find_file, self.engine, file_id, app)
        if row is None:
            raise not_found("file", file_id)
        return row

    async def read(self, app: str, file_id: str) -> bytes:
        await self.find(app, file_id)
        path = self._path(file_id)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise not_found("file", file_id) from None

    async def delete(self, app: str, file_id: str) -> None:
        if not await asyncio.to_thread(store.delete_file, self.engine, file_id, app):
            raise not_found("file", file_id)
        with contextlib.suppress(FileNotFoundError):  # a row without its bytes: gone too
            await asyncio.to_thread(self._path(file_id).unlink)

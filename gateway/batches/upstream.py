"""The provider's side of a batch: OpenAI's Files and Batch APIs, Anthropic's Message
Batches, over one httpx client. Every failure is an `UpstreamBatchError` with a short,
key-free message; the caller decides what the app sees."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import httpx

from gateway.domain.config import Provider
from gateway.providers.anthropic import ANTHROPIC_VERSION

TERMINAL_OPENAI = ("completed", "failed", "expired", "cancelled")


class UpstreamBatchError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True, slots=True)
class UpstreamState:
    status: str  # OpenAI's vocabulary: in_progress, cancelling, completed, cancelled...
    ended: bool  # nothing more will change upstream: its results can be read
    results: list[dict[str, Any]] | None = None  # once ended: every result line


def _headers(provider: Provider) -> dict[str, str]:
    key = provider.api_key()
    if provider.kind == "anthropic":
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers
    return {"authorization": f"Bearer {key}"} if key else {}


def _jsonl(text: str) -> list[dict[str, Any]]:
    out = []
    for raw in text.splitlines():
        if raw.strip():
            item = json.loads(raw)
            if isinstance(item, dict):
                out.append(item)
    return out


class BatchUpstream:
    def __init__(self, transport: httpx.AsyncBaseTransport | None = None,
                 timeout_s: float = 60.0) -> None:  # fmt: skip
        self.client = httpx.AsyncClient(transport=transport, timeout=timeout_s)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def _call(self, provider: Provider, method: str, path: str, **kw: Any
                    ) -> httpx.Response:  # fmt: skip
        url = provider.base_url.rstrip("/") + path
        try:
            response = await self.client.request(method, url, headers=_headers(provider), **kw)
        except httpx.HTTPError as err:
            raise UpstreamBatchError(f"{provider.name}: {type(err).__name__}") from None
        if response.status_code >= 400:
            raise UpstreamBatchError(f"{provider.name} answered {response.status_code} to "
                                     f"{method} {path.split('/')[1]}")  # fmt: skip
        return response

    async def _json(self, provider: Provider, method: str, path: str, **kw: Any
                    ) -> dict[str, Any]:  # fmt: skip
        response = await self._call(provider, method, path, **kw)
        try:
            body = response.json()
        except ValueError:
            raise UpstreamBatchError(f"{provider.name}: not JSON") from None
        if not isinstance(body, dict):
            raise UpstreamBatchError(f"{provider.name}: not a JSON object")
        return body

    # -- creating and cancelling ------------------------------------------------------

    async def create(self, provider: Provider, endpoint: str, window: str,
                     jsonl: bytes | None, requests: list[dict[str, Any]] | None) -> str:
        """The provider's id of a new batch: an OpenAI input file and batch, or an
        Anthropic message batch of `requests`."""
        if provider.kind == "anthropic":
            body = await self._json(provider, "POST", "/messages/batches",
                                    json={"requests": requests})  # fmt: skip
        else:
            uploaded = await self._json(provider, "POST", "/files", data={"purpose": "batch"},
                                        files={"file": ("batch.jsonl", jsonl or b"")})
            body = await self._json(provider, "POST", "/batches", json={
                "input_file_id": uploaded.get("id"), "endpoint": endpoint,
                "completion_window": window})  # fmt: skip
        if not isinstance(body.get("id"), str):
            raise UpstreamBatchError(f"{provider.name}: no batch id")
        return str(body["id"])

    async def cancel(self, provider: Provider, batch_id: str) -> None:
        path = "/messages/batches" if provider.kind == "anthropic" else "/batches"
        await self._call(provider, "POST", f"{path}/{batch_id}/cancel")

    # -- following ----------------------------------------------------------------------

    async def state(self, provider: Provider, batch_id: str) -> UpstreamState:
        if provider.kind == "anthropic":
            body = await self._json(provider, "GET", f"/messages/batches/{batch_id}")
            status = {"canceling": "cancelling"}.get(str(body.get("processing_status")),
                                                     str(body.get("processing_status")))
            if status != "ended":
                return UpstreamState(status, False)
            response = await self._call(provider, "GET", f"/messages/batches/{batch_id}/results")
            return UpstreamState("ended", True, _jsonl(response.text))
        body = await self._json(provider, "GET", f"/batches/{batch_id}")
        status = str(body.get("status"))
        if status not in TERMINAL_OPENAI:
            return UpstreamState(status, False)
        results: list[dict[str, Any]] = []
        for field in ("output_file_id", "error_file_id"):
            file_id = body.get(field)
            if isinstance(file_id, str) and file_id:
                response = await self._call(provider, "GET", f"/files/{file_id}/content")
                results.extend(_jsonl(response.text))
        return UpstreamState(status, True, results)

"""The simulator's files and batches, in memory, and how a batch's lines are answered."""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from typing import Any

from gateway.devtools.sim import bodies
from gateway.devtools.sim.behaviour import plan_reply
from gateway.devtools.sim.native import anthropic
from gateway.devtools.sim.native.requests import parse_anthropic
from gateway.devtools.sim.request import InvalidRequest, parse_chat_request
from gateway.devtools.sim.state import SimState


@dataclasses.dataclass
class SimBatch:
    id: str
    api: str  # "openai" | "anthropic"
    lines: list[dict[str, Any]]  # OpenAI's input lines, or Anthropic's requests
    endpoint: str
    created: float
    status: str = "in_progress"
    cancelled: bool = False
    output_file_id: str | None = None
    error_file_id: str | None = None
    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    counts: dict[str, int] = dataclasses.field(default_factory=dict)


class SimBatches:
    def __init__(self, delay_s: float, failed_custom_ids: tuple[str, ...]) -> None:
        self.delay_s = delay_s
        self.failed = set(failed_custom_ids)
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, SimBatch] = {}
        self.created = 0  # batches created since the last reset: what tests check
        self.uploads = 0

    def reset(self, delay_s: float, failed: tuple[str, ...]) -> None:
        self.__init__(delay_s, failed)  # type: ignore[misc]

    def add_file(self, data: bytes) -> str:
        file_id = f"file-sim{secrets.token_hex(10)}"
        self.files[file_id] = data
        self.uploads += 1
        return file_id

    def add(self, api: str, lines: list[dict[str, Any]], endpoint: str) -> SimBatch:
        prefix = "batch_sim" if api == "openai" else "msgbatch_sim"
        batch = SimBatch(f"{prefix}{secrets.token_hex(10)}", api, lines, endpoint, time.time())
        self.batches[batch.id] = batch
        self.created += 1
        return batch

    def advance(self, batch: SimBatch, state: SimState) -> SimBatch:
        """End the batch if its time has come (or it was cancelled): answer its lines."""
        if batch.status in ("completed", "cancelled", "ended"):
            return batch
        if not batch.cancelled and time.time() - batch.created < self.delay_s:
            return batch
        done = failed = 0
        for line in batch.lines:
            if batch.cancelled:
                result = _cancelled(batch.api, line)
                failed += 1
            elif line.get("custom_id") in self.failed:
                result = _failed(batch.api, line)
                failed += 1
            else:
                result = _answered(batch.api, line, state)
                done += int(_succeeded(batch.api, result))
                failed += int(not _succeeded(batch.api, result))
            batch.results.append(result)
        batch.counts = {"total": len(batch.lines), "completed": done, "failed": failed}
        if batch.api == "anthropic":
            batch.status = "ended"
            return batch
        batch.status = "cancelled" if batch.cancelled else "completed"
        ok = [r for r in batch.results if _succeeded("openai", r)]
        bad = [r for r in batch.results if not _succeeded("openai", r)]
        if ok:
            batch.output_file_id = self.add_file(_jsonl(ok))
        if bad:
            batch.error_file_id = self.add_file(_jsonl(bad))
        return batch


def _jsonl(items: list[dict[str, Any]]) -> bytes:
    return ("\n".join(json.dumps(i) for i in items) + "\n").encode()


def _succeeded(api: str, result: dict[str, Any]) -> bool:
    if api == "anthropic":
        return bool(result["result"]["type"] == "succeeded")
    response = result.get("response")
    return isinstance(response, dict) and response.get("status_code") == 200


def _failed(api: str, line: dict[str, Any]) -> dict[str, Any]:
    custom_id = line.get("custom_id")
    if api == "anthropic":
        return {"custom_id": custom_id, "result": {"type": "errored", "error": {
            "type": "error", "error": {"type": "api_error", "message": "Injected failure."}}}}
    return {"id": f"batch_req_{secrets.token_hex(12)}", "custom_id": custom_id,
            "response": {"status_code": 500, "request_id": secrets.token_hex(8),
                         "body": {"error": {"message": "Injected failure.",
                                            "type": "server_error"}}},
            "error": None}


def _cancelled(api: str, line: dict[str, Any]) -> dict[str, Any]:
    custom_id = line.get("custom_id")
    if api == "anthropic":
        return {"custom_id": custom_id, "result": {"type": "canceled"}}
    return {"id": f"batch_req_{secrets.token_hex(12)}", "custom_id": custom_id,
            "response": None, "error": {"code": "batch_cancelled", "message": "Cancelled."}}


def _answered(api: str, line: dict[str, Any], state: SimState) -> dict[str, Any]:
    custom_id = line.get("custom_id")
    try:
        if api == "anthropic":
            chat = parse_anthropic(line.get("params")).chat
        else:
            chat = parse_chat_request(line.get("body"))
    except InvalidRequest as err:
        return _invalid(api, custom_id, str(err))
    plan = plan_reply(chat, state.behaviour(chat.model), state.rng, state.prompt_cache)
    request_id = secrets.token_hex(12)
    if api == "anthropic":
        message = json.loads(anthropic.message_body(f"msg_{request_id}", chat.model, plan,
                                                    anthropic.usage(plan, 0, 0)))
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": message}}
    body = json.loads(bodies.completion_body(f"chatcmpl-{request_id}", int(time.time()),
                                             chat.model, plan))
    return {"id": f"batch_req_{request_id}", "custom_id": custom_id,
            "response": {"status_code": 200, "request_id": request_id, "body": body},
            "error": None}


def _invalid(api: str, custom_id: Any, message: str) -> dict[str, Any]:
    if api == "anthropic":
        return {"custom_id": custom_id, "result": {"type": "errored", "error": {
            "type": "error", "error": {"type": "invalid_request_error", "message": message}}}}
    return {"id": f"batch_req_{secrets.token_hex(12)}", "custom_id": custom_id,
            "response": {"status_code": 400, "request_id": secrets.token_hex(8),
                         "body": {"error": {"message": message,
                                            "type": "invalid_request_error"}}},
            "error": None}

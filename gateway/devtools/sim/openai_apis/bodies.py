"""Legacy completions, Responses and embeddings as OpenAI writes them: bodies, and stream
encoders with the chat encoder's interface (`sim.bodies.ChunkEncoder`), so the server's one
streaming loop paces, cuts and breaks them like a chat stream."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import struct
import time
from typing import Any

from gateway.devtools.sim.behaviour import PlannedChoice, ReplyPlan
from gateway.devtools.sim.bodies import DONE

# what OpenAI's embedding models return unless `dimensions` asks for fewer
DIMENSIONS = {"text-embedding-3-large": 3072}
DEFAULT_DIMENSIONS = 1536


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _usage(plan: ReplyPlan) -> dict[str, Any]:
    u = plan.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens}}


# -- legacy completions ---------------------------------------------------------------------


def _text(choice: PlannedChoice) -> str:
    return choice.content if choice.content is not None else (
        choice.tool_call.arguments if choice.tool_call else "")


def completion_body(request_id: str, created: int, model: str, plan: ReplyPlan,
                    with_usage: bool) -> bytes:
    body: dict[str, Any] = {
        "id": request_id, "object": "text_completion", "created": created, "model": model,
        "choices": [{"index": c.index, "text": _text(c), "logprobs": None,
                     "finish_reason": "stop" if c.finish_reason == "tool_calls"
                     else c.finish_reason} for c in plan.choices],
    }
    if with_usage:
        body["usage"] = _usage(plan)
    return _dumps(body).encode()


class CompletionsEncoder:
    done = DONE

    def __init__(self, request_id: str, created: int, model: str, include_usage: bool):
        self._head = {"id": request_id, "object": "text_completion", "created": created,
                      "model": model}
        self.include_usage = include_usage

    def _event(self, index: int, text: str, finish: str | None) -> str:
        body = {**self._head, "choices": [{"index": index, "text": text, "logprobs": None,
                                           "finish_reason": finish}]}
        return f"data: {_dumps(body)}\n\n"

    def opening(self, choice: PlannedChoice) -> str:
        return self._event(choice.index, "", None)

    def pieces(self, choice: PlannedChoice, start: int, stop: int) -> list[str]:
        return [self._event(choice.index, p, None) for p in choice.pieces[start:stop]]

    def closing(self, choice: PlannedChoice) -> str:
        finish = "stop" if choice.finish_reason == "tool_calls" else choice.finish_reason
        return self._event(choice.index, "", finish)

    def usage(self, plan: ReplyPlan) -> str:
        return f"data: {_dumps({**self._head, 'choices': [], 'usage': _usage(plan)})}\n\n"

    def broken(self) -> str:
        return self._event(0, " broken", None)[:40] + "\n\n"


# -- Responses ------------------------------------------------------------------------------


def responses_usage(plan: ReplyPlan) -> dict[str, Any]:
    u = plan.usage
    return {"input_tokens": u.prompt_tokens,
            "input_tokens_details": {"cached_tokens": u.cached_tokens},
            "output_tokens": u.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            "total_tokens": u.prompt_tokens + u.completion_tokens}


def _item(choice: PlannedChoice, item_id: str, done: bool) -> dict[str, Any]:
    status = "completed" if done else "in_progress"
    if choice.tool_call:
        call = choice.tool_call
        return {"id": item_id, "type": "function_call", "status": status,
                "call_id": call.id, "name": call.name,
                "arguments": call.arguments if done else ""}
    content = [{"type": "output_text", "text": choice.content or "", "annotations": []}]
    return {"id": item_id, "type": "message", "status": status, "role": "assistant",
            "content": content if done else []}


def response_object(response_id: str, created: int, model: str, plan: ReplyPlan | None,
                    usage: dict[str, Any] | None, item_id: str) -> dict[str, Any]:
    """The response: in progress (no plan), or finished with its output and usage."""
    status, details, output = "in_progress", None, []
    if plan is not None:
        choice = plan.choices[0]
        # each hosted web search is an output item before the answer (OpenAI counts them
        # there, not in usage)
        output = [{"id": f"ws_{item_id[4:]}_{i}", "type": "web_search_call",
                   "status": "completed", "action": {"type": "search", "query": "sim"}}
                  for i in range(plan.web_searches)]
        output.append(_item(choice, item_id, True))
        status = "incomplete" if choice.finish_reason == "length" else "completed"
        if status == "incomplete":
            details = {"reason": "max_output_tokens"}
    return {"id": response_id, "object": "response", "created_at": created, "status": status,
            "error": None, "incomplete_details": details, "instructions": None,
            "model": model, "output": output, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "usage": usage,
            "service_tier": "auto" if plan is None else plan.service_tier}


class ResponsesEncoder:
    """Named events, numbered; the terminal event carries the usage (without it when the
    `no_usage` fault left the usage out: `done` then closes the response)."""

    include_usage = True

    def __init__(self, response_id: str, created: int, model: str, item_id: str):
        self._args = (response_id, created, model)
        self._item_id = item_id
        self._seq = 0
        self._closed = False
        self._plan: ReplyPlan | None = None

    def _event(self, kind: str, **fields: Any) -> str:
        body = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return f"event: {kind}\ndata: {_dumps(body)}\n\n"

    def _where(self) -> dict[str, Any]:
        return {"item_id": self._item_id, "output_index": 0}

    def opening(self, choice: PlannedChoice) -> str:
        response = response_object(*self._args, None, None, self._item_id)
        out = [self._event("response.created", response=response),
               self._event("response.in_progress", response=response),
               self._event("response.output_item.added", output_index=0,
                           item=_item(choice, self._item_id, False))]
        if not choice.tool_call:
            out.append(self._event("response.content_part.added", **self._where(),
                                   content_index=0,
                                   part={"type": "output_text", "text": "", "annotations": []}))
        return "".join(out)

    def pieces(self, choice: PlannedChoice, start: int, stop: int) -> list[str]:
        if choice.tool_call:
            return [self._event("response.function_call_arguments.delta", **self._where(),
                                delta=p) for p in choice.pieces[start:stop]]
        return [self._event("response.output_text.delta", **self._where(), content_index=0,
                            delta=p, logprobs=[]) for p in choice.pieces[start:stop]]

    def closing(self, choice: PlannedChoice) -> str:
        item = _item(choice, self._item_id, True)
        if choice.tool_call:
            out = [self._event("response.function_call_arguments.done", **self._where(),
                               arguments=choice.tool_call.arguments)]
        else:
            text = choice.content or ""
            out = [self._event("response.output_text.done", **self._where(), content_index=0,
                               text=text, logprobs=[]),
                   self._event("response.content_part.done", **self._where(), content_index=0,
                               part=item["content"][0])]
        out.append(self._event("response.output_item.done", output_index=0, item=item))
        return "".join(out)

    def _terminal(self, plan: ReplyPlan | None, usage: dict[str, Any] | None) -> str:
        self._closed = True
        response = response_object(*self._args, plan, usage, self._item_id)
        if plan is None:  # no plan to say how it ended: completed
            response["status"] = "completed"
        kind = "response.incomplete" if response["status"] == "incomplete" \
            else "response.completed"
        return self._event(kind, response=response)

    def usage(self, plan: ReplyPlan) -> str:
        return self._terminal(plan, responses_usage(plan))

    @property
    def done(self) -> str:
        return "" if self._closed else self._terminal(None, None)

    def broken(self) -> str:
        self._closed = True
        return self._event("response.output_text.delta", delta=" broken")[:60] + "\n\n"


def response_body(response_id: str, created: int, model: str, plan: ReplyPlan,
                  with_usage: bool, item_id: str) -> bytes:
    usage = responses_usage(plan) if with_usage else None
    return _dumps(response_object(response_id, created, model, plan, usage, item_id)).encode()


# -- embeddings -----------------------------------------------------------------------------


def embedding(item: str | list[int], dimensions: int) -> list[float]:
    """A unit vector that depends on the input only: the same text, the same embedding."""
    seed = hashlib.blake2b(repr(item).encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(seed, "big"))
    values = [rng.gauss(0, 1) for _ in range(dimensions)]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [round(v / norm, 6) for v in values]


def embeddings_body(model: str, items: list[str | list[int]], dimensions: int,
                    encoding: str, prompt_tokens: int) -> bytes:
    data = []
    for i, item in enumerate(items):
        vector = embedding(item, dimensions)
        value: Any = vector if encoding != "base64" else base64.b64encode(
            struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": i, "embedding": value})
    return _dumps({"object": "list", "data": data, "model": model,
                   "usage": {"prompt_tokens": prompt_tokens,
                             "total_tokens": prompt_tokens}}).encode()


def now() -> int:
    return int(time.time())

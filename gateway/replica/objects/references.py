"""Which provider objects a request refers to, and which an answer created: pure.

Every app reaches a provider with the same upstream credential, so the provider cannot
tell one app's stored response, conversation or file from another's. The gateway can: it
records the ids its answers create (`created`, `created_in_event`) and lets a request
refer (`referenced`) only to ids its own app created (`gateway.replica.objects.registry`).

The fields, by API: Responses' `previous_response_id`, `conversation` (an id or
`{"id": ...}`), input parts' `file_id`, `file_search` tools' `vector_store_ids`,
`code_interpreter` tools' `container` (an id, or `{"file_ids": [...]}`); Chat
Completions' `file` parts (`file.file_id`); Anthropic Messages' `container` and content
blocks whose `source` is `{"type": "file", "file_id": ...}`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from gateway.domain import json_codec
from gateway.domain.endpoints import Endpoint

# a request names at most this many before it is refused: each one is looked up
MAX_REFERENCES = 64
_MAX_ID_CHARS = 256


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str  # response, conversation, file, vector_store, container
    object_id: str
    param: str  # the request field that names it, for the error


class BadReference(ValueError):
    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param


def referenced(endpoint: Endpoint, body: dict[str, Any]) -> list[ObjectRef]:
    """Every provider object id the request names (a malformed one raises BadReference)."""
    if endpoint is Endpoint.EMBEDDINGS:
        return []
    refs = list(_refs(endpoint, body))
    if len(refs) > MAX_REFERENCES:
        raise BadReference("input", f"a request may name at most {MAX_REFERENCES} objects")
    for ref in refs:
        if not ref.object_id or len(ref.object_id) > _MAX_ID_CHARS:
            raise BadReference(ref.param, f"{ref.param}: not a valid {ref.kind} id")
    return refs


def _id(value: Any, param: str, kind: str) -> ObjectRef:
    if isinstance(value, dict):
        value = value.get("id")
    if not isinstance(value, str):
        raise BadReference(param, f"{param}: a {kind} id must be a string")
    return ObjectRef(kind, value, param)


def _refs(endpoint: Endpoint, body: dict[str, Any]) -> Iterator[ObjectRef]:
    if body.get("previous_response_id") is not None:
        yield _id(body["previous_response_id"], "previous_response_id", "response")
    if body.get("conversation") is not None:
        yield _id(body["conversation"], "conversation", "conversation")
    container = body.get("container")
    if endpoint is Endpoint.MESSAGES and container is not None:
        yield _id(container, "container", "container")
    for index, tool in enumerate(_list(body.get("tools"))):
        yield from _tool_refs(tool, f"tools[{index}]")
    for field in ("input", "messages"):
        yield from _part_refs(body.get(field), field)


def _tool_refs(tool: Any, param: str) -> Iterator[ObjectRef]:
    if not isinstance(tool, dict):
        return
    for store in _list(tool.get("vector_store_ids")):
        yield _id(store, f"{param}.vector_store_ids", "vector_store")
    container = tool.get("container")
    if isinstance(container, dict):
        for file_id in _list(container.get("file_ids")):
            yield _id(file_id, f"{param}.container.file_ids", "file")
    elif container is not None:
        yield _id(container, f"{param}.container", "container")


def _part_refs(node: Any, param: str, depth: int = 0) -> Iterator[ObjectRef]:
    """`file_id` wherever a content part carries one (input files and images, Chat's
    `file` parts, Anthropic's file sources), at any depth of the message list."""
    if depth > 8:
        return
    if isinstance(node, list):
        for item in node:
            yield from _part_refs(item, param, depth + 1)
    elif isinstance(node, dict):
        if node.get("file_id") is not None:
            yield _id(node["file_id"], f"{param}.file_id", "file")
        for key in ("content", "file", "source", "image_url"):
            if isinstance(node.get(key), list | dict):
                yield from _part_refs(node[key], param, depth + 1)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def created(endpoint: Endpoint, body: dict[str, Any]) -> list[ObjectRef]:
    """The objects an upstream answer says it stored: a Responses answer's own id (what
    `previous_response_id` names next), the containers its tools or Anthropic made."""
    found: list[ObjectRef] = []
    if endpoint is Endpoint.RESPONSES and isinstance(body.get("id"), str):
        found.append(ObjectRef("response", body["id"], "id"))
    if isinstance(container := body.get("container"), dict) and isinstance(
        container.get("id"), str
    ):
        found.append(ObjectRef("container", container["id"], "container"))
    for item in _list(body.get("output")):
        if isinstance(item, dict) and isinstance(item.get("container_id"), str):
            found.append(ObjectRef("container", item["container_id"], "output"))
    return found


_WRAPPER_KEYS = {Endpoint.RESPONSES: b'"response"', Endpoint.MESSAGES: b'"message"'}


def created_in_event(endpoint: Endpoint, payload: bytes) -> list[ObjectRef]:
    """What a stream's event says was created: Responses' `response.created` carries the
    response (its id), Anthropic's `message_start` the message (and its container)."""
    # only an event that wraps the object has the key: the rest of the stream's events
    # (its text's deltas, or chat chunks a Messages stream is translated from) are not
    # parsed here, on the way to the client's first token
    key = _WRAPPER_KEYS.get(endpoint)
    if key is None or key not in payload:
        return []
    try:
        event = json_codec.loads(payload)
    except ValueError:
        return []
    if not isinstance(event, dict):
        return []
    inner = event.get("response") or event.get("message")
    return created(endpoint, inner) if isinstance(inner, dict) else []

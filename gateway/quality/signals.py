"""What an answer says about its own quality, read off it without another model call.

- `finish_reason`: `length` is a truncated answer, `content_filter` a filtered one;
- `refusal`: the model declined (OpenAI's `message.refusal`);
- `json_valid`: in JSON mode (`response_format` `json_object`) whether the answer parses;
  with structured outputs (`json_schema`) whether it also validates against the schema;
- `tool_args_valid`: whether every tool call's arguments parse and validate against
  the calling tool's `parameters` schema (an unknown tool's call is invalid).

None where a signal does not apply (no JSON asked for, no tool called, an error). The
request path pays a few dict lookups per answer; parsing and validation only happen
when JSON or a tool call is there to check. Validators are built once per schema and
never fetch a remote `$ref` (jsonschema's default registry would).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import orjson
import referencing
from jsonschema import validators
from jsonschema.exceptions import SchemaError

MAX_FINISH_REASON_CHARS = 40
_JSON_KINDS = frozenset({"json_object", "json_schema"})


@dataclasses.dataclass(frozen=True, slots=True)
class Signals:
    finish_reason: str | None = None
    refusal: bool | None = None
    json_valid: bool | None = None
    tool_args_valid: bool | None = None


NO_SIGNALS = Signals()


def chat_signals(request: dict[str, Any], answer: dict[str, Any]) -> Signals:
    """The signals of a plain chat completion (its first choice) for its request."""
    choices = answer.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        return NO_SIGNALS
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    content = message.get("content")
    return Signals(
        finish_reason=_finish(choice.get("finish_reason")),
        refusal=bool(message.get("refusal")),
        json_valid=json_validity(request, content if isinstance(content, str) else None),
        tool_args_valid=tool_call_validity(request, message.get("tool_calls")),
    )


def stream_signals(request: dict[str, Any], finish_reason: Any, text: str) -> Signals:
    """A stream's signals: its last finish reason, and its text's JSON validity when JSON
    was asked for and no tool could have been called (the relayed text then holds tool
    arguments too). Tool calls in streams are not checked."""
    tools = request.get("tools")
    return Signals(
        finish_reason=_finish(finish_reason),
        json_valid=None if tools else json_validity(request, text),
    )


def _finish(value: Any) -> str | None:
    return value[:MAX_FINISH_REASON_CHARS] if isinstance(value, str) and value else None


def json_validity(request: dict[str, Any], content: str | None) -> bool | None:
    fmt = request.get("response_format")
    if not isinstance(fmt, dict) or fmt.get("type") not in _JSON_KINDS or content is None:
        return None
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        return False
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    return _valid(schema, value) if fmt["type"] == "json_schema" else True


def tool_call_validity(request: dict[str, Any], calls: Any) -> bool | None:
    if not isinstance(calls, list) or not calls:
        return None
    schemas = _tool_schemas(request.get("tools"))
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or function.get("name") not in schemas:
            return False
        arguments = function.get("arguments")
        try:
            value = orjson.loads(arguments) if isinstance(arguments, str) else None
        except orjson.JSONDecodeError:
            return False
        if value is None or not _valid(schemas[function["name"]], value):
            return False
    return True


def _tool_schemas(tools: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tool in tools if isinstance(tools, list) else ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out[function["name"]] = function.get("parameters")
    return out


def _valid(schema: Any, value: Any) -> bool:
    """Whether `value` validates against `schema`; a missing or unusable schema checks
    nothing beyond the parse."""
    if not isinstance(schema, dict):
        return True
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return True
    validator = _validator(key)
    if validator is None:
        return True
    try:
        return bool(validator.is_valid(value))
    except Exception:  # noqa: BLE001 - a $ref we will not fetch, a bad pattern: unchecked
        return True


@functools.lru_cache(maxsize=256)
def _validator(schema_json: bytes) -> Any:
    schema = orjson.loads(schema_json)
    cls = validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    # an empty registry: a client's "$ref" to a URL is never fetched from a replica
    return cls(schema, registry=referencing.Registry())

"""Validation of embeddings, legacy completions and Responses requests, before routing.

Like `gateway.replica.chat_request`: only the fields the gateway acts on are checked, each
error names OpenAI's `param`, and every other field passes through to the upstream as it
came. Each validator returns the request path's `ChatRequest` (its body is the API's body).
"""

from __future__ import annotations

from typing import Any

from gateway.domain.openai_errors import bad_request
from gateway.replica.chat_request import (
    MAX_COUNT,
    ChatRequest,
    check_identifier,
    choices,
    count_field,
)

# OpenAI's own limit on the inputs of one embeddings request
MAX_EMBEDDING_INPUTS = 2048
_ENCODINGS = ("float", "base64")


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        kind = "null" if body is None else type(body).__name__
        raise bad_request(f"The request body must be a JSON object, not {kind}.")
    return body


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request("`model` is required and must be a non-empty string.", param="model")
    check_identifier(model, "model")
    user = body.get("user")
    if user is not None:
        if not isinstance(user, str):
            raise bad_request("`user` must be a string.", param="user")
        check_identifier(user, "user")
    return model


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive(body: dict[str, Any], name: str) -> int | None:
    return count_field(body, name)


def _numbers(body: dict[str, Any], *names: str) -> None:
    for name in names:
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise bad_request(f"`{name}` must be a number.", param=name)


def _stream(body: dict[str, Any]) -> tuple[bool, bool]:
    """(stream, include_usage) as the client asked."""
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise bad_request("`stream` must be a boolean.", param="stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad_request("`stream_options` must be an object.", param="stream_options")
    return bool(stream), bool(options and options.get("include_usage") is True)


def _token_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        _int(t) and 0 <= t <= MAX_COUNT for t in value
    )


def _prompt_like(value: Any, param: str, *, allow_empty_string: bool) -> None:
    """A string, a list of strings, a token array or a list of token arrays."""
    if isinstance(value, str):
        if not value and not allow_empty_string:
            raise bad_request(f"`{param}` must not be empty.", param=param)
        return
    if not isinstance(value, list) or not value:
        raise bad_request(
            f"`{param}` must be a string, an array of strings, an array of tokens or an "
            "array of token arrays.",
            param=param,
        )
    if _token_array(value) or all(isinstance(v, str) for v in value):
        if not allow_empty_string and any(v == "" for v in value):
            raise bad_request(f"`{param}` must not hold empty strings.", param=param)
        return
    for i, item in enumerate(value):
        if not _token_array(item):
            raise bad_request(
                f"{param}[{i}] must be a string or a non-empty array of token ids "
                "(all items of one kind).",
                param=f"{param}[{i}]",
            )


def validate_embeddings_request(body: Any) -> ChatRequest:
    body = _object(body)
    model = _model(body)
    if "input" not in body:
        raise bad_request("`input` is required.", param="input")
    _prompt_like(body["input"], "input", allow_empty_string=False)
    if isinstance(body["input"], list) and len(body["input"]) > MAX_EMBEDDING_INPUTS:
        raise bad_request(
            f"`input` holds {len(body['input'])} items; at most {MAX_EMBEDDING_INPUTS}.",
            param="input",
        )
    encoding = body.get("encoding_format")
    if encoding is not None and encoding not in _ENCODINGS:
        raise bad_request(
            "`encoding_format` must be 'float' or 'base64'.", param="encoding_format"
        )
    _positive(body, "dimensions")
    return ChatRequest(body=body, model=model, stream=False, include_usage=False, max_tokens=None)


def validate_completions_request(body: Any) -> ChatRequest:
    body = _object(body)
    model = _model(body)
    if "prompt" not in body:
        raise bad_request("`prompt` is required.", param="prompt")
    _prompt_like(body["prompt"], "prompt", allow_empty_string=True)
    stream, include_usage = _stream(body)
    _numbers(body, "temperature", "top_p", "presence_penalty", "frequency_penalty")
    n, best_of = choices(body, "n"), choices(body, "best_of")
    return ChatRequest(
        body=body,
        model=model,
        stream=stream,
        include_usage=include_usage,
        max_tokens=_positive(body, "max_tokens"),
        # `best_of` candidates are generated and billed, `n` of them returned
        outputs=max(n or 1, best_of or 1),
    )


def validate_responses_request(body: Any) -> ChatRequest:
    body = _object(body)
    model = _model(body)
    given = body.get("input")
    # a stored conversation or prompt template may stand in for the input
    stands_in = any(body.get(k) is not None for k in ("previous_response_id", "conversation",
                                                       "prompt"))
    if given is None and not stands_in:
        raise bad_request("`input` is required (a string or an array of items).", param="input")
    if given is not None:
        if not isinstance(given, str | list):
            raise bad_request("`input` must be a string or an array of items.", param="input")
        if isinstance(given, list):
            for i, item in enumerate(given):
                if not isinstance(item, dict):
                    raise bad_request(f"input[{i}] must be an object.", param=f"input[{i}]")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request("`instructions` must be a string.", param="instructions")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise bad_request("`tools` must be an array.", param="tools")
    stream, _ = _stream(body)
    _numbers(body, "temperature", "top_p")
    return ChatRequest(
        body=body,
        model=model,
        stream=stream,
        include_usage=True,  # a Responses stream always ends with its usage
        max_tokens=_positive(body, "max_output_tokens"),
    )


# -- what is sent upstream ---------------------------------------------------------------


def with_model(req: ChatRequest, upstream_model: str) -> dict[str, Any]:
    """The client's body with the provider's model id (embeddings, Responses)."""
    return {**req.body, "model": upstream_model}


def completions_body(req: ChatRequest, upstream_model: str) -> dict[str, Any]:
    """As for chat: usage asked for on every stream, so that none is logged at $0."""
    body = with_model(req, upstream_model)
    if req.stream:
        body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    return body


# -- what an estimate counts when the upstream reports no usage ----------------------------


def prompt_messages(value: Any) -> list[dict[str, Any]] | None:
    """A prompt or an embeddings input as chat-like messages to estimate. A token array
    goes as its list of ids: each id counts as at least one token (its digits), so the
    estimate never falls below the array's length."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [{"role": "user", "content": v} for v in value]
    if _token_array(value):
        return [{"role": "user", "content": value}]
    if isinstance(value, list) and value and all(_token_array(v) for v in value):
        return [{"role": "user", "content": v} for v in value]
    return None


def responses_messages(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A Responses request's instructions and input items as chat-like messages."""
    out: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        out.append({"role": "system", "content": body["instructions"]})
    given = body.get("input")
    if isinstance(given, str):
        out.append({"role": "user", "content": given})
    elif isinstance(given, list):
        for item in given:
            if not isinstance(item, dict):
                continue
            content = item.get("content", item.get("output", item.get("arguments")))
            out.append({"role": str(item.get("role") or "user"), "content": content})
    return out or None

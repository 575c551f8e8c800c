"""Reading a request body with its size counted as it arrives.

`Request.body()` buffers everything before anyone can look at the size, and a chunked
upload declares none: 64 MiB of it would sit in the replica's memory before the 413.
Here the limit is checked per received chunk, so at most one chunk beyond it is held.
"""

from __future__ import annotations

from starlette.requests import Request

from gateway.domain.openai_errors import OpenAIError


def too_large(size: int | str, limit: int) -> OpenAIError:
    return OpenAIError(
        413,
        f"Request body is {size} bytes; the limit is {limit} bytes.",
        code="request_too_large",
    )


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large(declared, limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(f"over {limit}", limit)
        parts.append(chunk)
    return b"".join(parts)

"""Reading a request body with its size counted as it arrives.

`Request.body()` buffers everything before anyone can look at the size, and a chunked
upload declares none: 64 MiB of it would sit in the replica's memory before the 413.
Here the limit is checked per received chunk, so at most one chunk beyond it is held.
"""

from __future__ import annotations

import re

from starlette.requests import Request

from gateway.domain.openai_errors import OpenAIError

_DIGITS = re.compile(r"[0-9]+")


def too_large(size: int | str, limit: int) -> OpenAIError:
    return OpenAIError(
        413,
        f"Request body is {size} bytes; the limit is {limit} bytes.",
        code="request_too_large",
    )


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length") or ""
    # ASCII digits only, and a length is compared by its digits before int() sees them
    # (int() refuses more than 4,300 digits, and "²" passes str.isdigit)
    if _DIGITS.fullmatch(declared) and (len(declared) > 18 or int(declared) > limit):
        raise too_large(f"over {limit}", limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(f"over {limit}", limit)
        parts.append(chunk)
    return b"".join(parts)

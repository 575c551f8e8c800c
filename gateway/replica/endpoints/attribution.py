"""A request's end user, session and tags on the request path: which body fields each API
carries, the key's part, the stored form of the end user, and the client's 400.

The parsing and the bounds are `gateway.attribution.inputs` (pure); this module only
knows the request path's facts (endpoints, the caller, OpenAI's error shape).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gateway.attribution.identity import EndUserIds
from gateway.attribution.inputs import (
    NO_ATTRIBUTION,
    Attribution,
    AttributionError,
    KeyTags,
    Sources,
    read_attribution,
)
from gateway.domain.endpoints import Endpoint
from gateway.domain.openai_errors import OpenAIError

# OpenAI documents `user` and `safety_identifier` on these four APIs and `metadata` on chat
# completions and Responses; Anthropic's Messages carries `metadata.user_id`
SOURCES: dict[Endpoint, Sources] = {
    Endpoint.CHAT_COMPLETIONS: Sources(openai_user=True, openai_metadata=True),
    Endpoint.COMPLETIONS: Sources(openai_user=True),
    Endpoint.EMBEDDINGS: Sources(openai_user=True),
    Endpoint.RESPONSES: Sources(openai_user=True, openai_metadata=True),
    Endpoint.MESSAGES: Sources(anthropic_metadata=True),
}


def attribute(
    endpoint: Endpoint,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    key: KeyTags,
    ids: EndUserIds,
) -> Attribution:
    """The request's attribution with its end user as stored; a value out of bounds is
    the client's 400 naming the field (before anything goes upstream)."""
    try:
        found = read_attribution(headers, body, SOURCES[endpoint], key)
    except AttributionError as err:
        raise OpenAIError(400, err.message, param=err.param, code="invalid_attribution") from None
    if found is NO_ATTRIBUTION or found.end_user is None or not ids.hashing:
        return found
    return dataclasses.replace(found, end_user=ids.stored(found.end_user))

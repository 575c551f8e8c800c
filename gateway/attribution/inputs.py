"""A request's attribution, read from its headers and body and bounded. Pure.

Where each part comes from (a header wins over the body, as the gateway's own word):

- the end user: `x-costgate-user`, else OpenAI's `safety_identifier` or `user` (chat
  completions, completions, embeddings, Responses), else Anthropic's `metadata.user_id`;
- the session (or trace) id: `x-costgate-session`;
- tags: the key's default tags, then OpenAI's `metadata` object (chat completions and
  Responses), then `x-costgate-tags: feature=search,env=prod`, each adding to (and
  overriding a key of) the one before.

Bounds are OpenAI's own for `metadata` (16 pairs, keys up to 64 characters, values up to
512), and 256 characters for an end user or a session; printable text only. Anything else
is the client's error, named by its field, before anything is sent upstream.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

USER_HEADER = "x-costgate-user"
SESSION_HEADER = "x-costgate-session"
TAGS_HEADER = "x-costgate-tags"

MAX_ID_CHARS = 256
MAX_TAGS = 16
MAX_TAG_KEY_CHARS = 64
MAX_TAG_VALUE_CHARS = 512


class AttributionError(ValueError):
    """An attribution input out of bounds: the client's 400, naming `param`."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


@dataclasses.dataclass(frozen=True, slots=True)
class Attribution:
    end_user: str | None = None
    session_id: str | None = None
    tags: Mapping[str, str] | None = None  # None: no tag at all (never an empty mapping)


NO_ATTRIBUTION = Attribution()


@dataclasses.dataclass(frozen=True, slots=True)
class Sources:
    """Which body fields an API carries (the request path's per-endpoint facts)."""

    openai_user: bool = False  # `user` and `safety_identifier`
    openai_metadata: bool = False  # `metadata` as tags
    anthropic_metadata: bool = False  # `metadata.user_id` as the end user


@dataclasses.dataclass(frozen=True, slots=True)
class KeyTags:
    """A key's part: its default tags and, when restricted, the only tag keys allowed."""

    defaults: Mapping[str, str] | None = None
    allowed_keys: frozenset[str] | None = None  # None: any key


NO_KEY_TAGS = KeyTags()


def check_text(value: Any, param: str, max_chars: int) -> str:
    """A bounded, printable string, or the client's error naming `param`."""
    if not isinstance(value, str):
        raise AttributionError(param, f"`{param}` must be a string.")
    if not value:
        raise AttributionError(param, f"`{param}` must not be empty.")
    if len(value) > max_chars:
        raise AttributionError(
            param, f"`{param}` is {len(value)} characters long; at most {max_chars} are allowed."
        )
    if not value.isprintable():
        raise AttributionError(param, f"`{param}` must hold printable characters only.")
    return value


def check_tag(key: Any, value: Any, param: str) -> tuple[str, str]:
    k = check_text(key, f"{param} key", MAX_TAG_KEY_CHARS)
    if not isinstance(value, str):
        raise AttributionError(param, f"`{param}` values must be strings (the value of {k!r}).")
    if len(value) > MAX_TAG_VALUE_CHARS:
        raise AttributionError(
            param,
            f"the value of {k!r} in `{param}` is {len(value)} characters long; "
            f"at most {MAX_TAG_VALUE_CHARS} are allowed.",
        )
    if not value.isprintable():
        raise AttributionError(param, f"the value of {k!r} in `{param}` must be printable.")
    return k, value


def parse_tags_header(text: str) -> dict[str, str]:
    """`feature=search, env=prod` -> {"feature": "search", "env": "prod"}."""
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        if not eq:
            raise AttributionError(
                TAGS_HEADER, f"`{TAGS_HEADER}` takes key=value pairs separated by commas."
            )
        k, v = check_tag(key.strip(), value.strip(), TAGS_HEADER)
        out[k] = v
    return out


def _metadata_tags(metadata: Any) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise AttributionError("metadata", "`metadata` must be an object.")
    if len(metadata) > MAX_TAGS:
        raise AttributionError(
            "metadata", f"`metadata` holds {len(metadata)} pairs; at most {MAX_TAGS} are allowed."
        )
    return dict(check_tag(k, v, "metadata") for k, v in metadata.items())


def _body_user(body: Mapping[str, Any], sources: Sources) -> str | None:
    if sources.openai_user:
        for field in ("safety_identifier", "user"):
            if body.get(field) is not None:
                return check_text(body[field], field, MAX_ID_CHARS)
    if sources.anthropic_metadata:
        metadata = body.get("metadata")
        if isinstance(metadata, dict) and metadata.get("user_id") is not None:
            return check_text(metadata["user_id"], "metadata.user_id", MAX_ID_CHARS)
    return None


def read_attribution(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    sources: Sources,
    key: KeyTags = NO_KEY_TAGS,
) -> Attribution:
    """The request's attribution (raises AttributionError for a value out of bounds)."""
    header_user = headers.get(USER_HEADER)
    body_user = _body_user(body, sources)  # checked even when the header wins
    user = check_text(header_user, USER_HEADER, MAX_ID_CHARS) if header_user else body_user
    session = headers.get(SESSION_HEADER)
    if session:
        check_text(session, SESSION_HEADER, MAX_ID_CHARS)
    own: dict[str, str] = {}
    if sources.openai_metadata:
        own.update(_metadata_tags(body.get("metadata")))
    if tags_text := headers.get(TAGS_HEADER):
        own.update(parse_tags_header(tags_text))
    if len(own) > MAX_TAGS:
        raise AttributionError(
            TAGS_HEADER, f"the request carries {len(own)} tags; at most {MAX_TAGS} are allowed."
        )
    if key.allowed_keys is not None:
        for k in own:
            if k not in key.allowed_keys:
                allowed = ", ".join(sorted(key.allowed_keys)) or "none"
                raise AttributionError(
                    TAGS_HEADER, f"this key may not set the tag {k!r} (allowed: {allowed})."
                )
    tags = {**key.defaults, **own} if key.defaults else own
    if user is None and not session and not tags:
        return NO_ATTRIBUTION
    return Attribution(user, session or None, tags or None)

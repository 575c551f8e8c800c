"""Label values that stay bounded, whatever the request path hands over.

Label values come from configured names (models, providers, aliases, apps) and small
vocabularies (status classes, error reasons), so they are bounded by construction. This
guard makes that a property rather than a promise: a value that does not look like a
name, or any new value once a label already has `max_values` distinct ones, becomes
"other", so a bug upstream cannot blow up the series count (or leak free text).
"""

from __future__ import annotations

import re

from gateway.domain.usage_record import RequestStatus, UsageRecord

OTHER = "other"
# configured names: letters, digits and . _ : / - (e.g. "claude-sonnet-4.5")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,79}$")


class LabelGuard:
    def __init__(self, max_values: int = 200) -> None:
        self._max = max_values
        self._seen: dict[str, set[str]] = {}

    def value(self, label: str, raw: str | None) -> str:
        """The value to export for `raw`; "" for none (Prometheus reads it as absent)."""
        if not raw:
            return ""
        seen = self._seen.setdefault(label, set())
        if raw in seen:
            return raw
        if not _NAME.match(raw) or len(seen) >= self._max:
            return OTHER
        seen.add(raw)
        return raw


def status_class(record: UsageRecord) -> str:
    """2xx/4xx/5xx from the HTTP status; a stream the client cancelled is its own class."""
    if record.status is RequestStatus.CANCELLED:
        return "cancelled"
    return f"{record.http_status // 100}xx"

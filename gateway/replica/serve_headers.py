"""Serve's per-request switches stay with the operator, not the client.

Serve reads two request headers before our app sees the request: `x-request-timeout-seconds`
(0 or less turns `http_options.request_timeout_s` off for that request) and
`x-request-disconnect-disabled: ?1` (the handler is no longer cancelled when the client
leaves). A client could use them to hold a replica's slot for ever and to keep
upstream calls running after it left. Serve offers no option to ignore them, and in
direct-ingress (HAProxy) mode the replica process itself parses them, through two
module-level functions of `ray.serve._private.replica`: this module replaces those two,
in the replica's process, with versions that always take the configured behaviour.

It is Ray's private API: `install()` checks that the names still exist and logs loudly
if they do not (a Ray upgrade), instead of failing the replica. In proxy mode
(`gateway.ingress: proxy`) the proxy actor parses them in its own process: docs say so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("costgate.ingress")

TIMEOUT_HEADER = b"x-request-timeout-seconds"
DISCONNECT_HEADER = b"x-request-disconnect-disabled"


def _configured_timeout(headers: Mapping[bytes, bytes], default_timeout_s: float | None) -> Any:
    return default_timeout_s


def _disconnect_never_disabled(headers: Mapping[bytes, bytes]) -> bool:
    return False


def install() -> bool:
    """Patch Serve's replica module in this process; True when both switches are off."""
    try:
        from ray.serve._private import replica
    except ImportError:  # pragma: no cover - Ray is a dependency
        return False
    replacements = {
        "parse_request_timeout_header": _configured_timeout,
        "parse_disconnect_disabled_header": _disconnect_never_disabled,
    }
    if not all(hasattr(replica, name) for name in replacements):
        log.error(
            "this Ray version parses %s elsewhere: clients can switch off the request "
            "timeout and disconnect handling",
            ", ".join(h.decode() for h in (TIMEOUT_HEADER, DISCONNECT_HEADER)),
        )
        return False
    for name, replacement in replacements.items():
        setattr(replica, name, replacement)
    return True

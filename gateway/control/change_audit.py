"""The audit of one live routing change, from intent to outcome, around its PUT.

`gateway.control.routing_update.apply_routing_settings` runs a change inside these steps:
the app's routing lock (`db.routing_audit.routing_change_lock`), the `pending` row written
before anything is sent, and the row settled by how far the change got. Kept apart from
the REST calls so that the rules for which outcome a failure means live in one place:

- stopped before the PUT (a conflict, a failed re-read): `failed`, nothing was sent;
- the PUT refused by Serve, or the RayService patch by the Kubernetes API (an HTTP
  status, or its compare-and-swap `test` failing): `failed`;
- the PUT without an answer: `timed_out` (Serve may have taken it);
- Serve reports the deployment failed on the new config: `failed`;
- anything else that stops the rollout wait (its deadline, the dashboard gone, Ctrl-C):
  `timed_out`, sent and not confirmed;
- confirmed: `applied`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from db.routing_audit import (
    APPLIED,
    FAILED,
    TIMED_OUT,
    RoutingAudit,
    RoutingLockBusy,
    record_routing_change,
    routing_change_lock,
)
from gateway.control.declarative import RolloutFailed, RoutingUpdateError
from gateway.control.kube_api import KubeApiError
from gateway.control.serve_admin import ServeAdminError
from gateway.domain.routing_settings import RoutingSettings


class RoutingConflict(RoutingUpdateError):
    """Someone else changed the routing between our read and our write: read again."""


@dataclasses.dataclass(frozen=True, slots=True)
class Intent:
    """The audit row's content, known before anything is locked or sent."""

    actor: str
    app_name: str
    alias: str | None
    before: Any
    after: Any
    note: str | None
    version_before: int
    version_after: int


def intent(
    actor: str,
    app_name: str,
    alias: str | None,
    note: str | None,
    before: RoutingSettings,
    after: RoutingSettings,
) -> Intent:
    if alias is not None:
        # the alias's weights, model -> exact decimal string: what "before → after" shows
        old: Any = _weights_json(before, alias)
        new: Any = _weights_json(after, alias)
    else:
        old, new = before.model_dump(mode="json"), after.model_dump(mode="json")
    return Intent(actor, app_name, alias, old, new, note, before.version, after.version)


def _weights_json(settings: RoutingSettings, alias: str) -> dict[str, str] | None:
    weights = settings.aliases.get(alias)
    return None if weights is None else {m: str(w) for m, w in weights.items()}


def _db_error(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err)[:300]}"


@contextlib.contextmanager
def locked(database_url: str | None, change: Intent, wait_s: float) -> Iterator[RoutingAudit]:
    """The app's routing lock, with the change's `pending` row written under it.

    A writer that waited `wait_s` in vain leaves a `failed` row and gets RoutingConflict;
    a database we cannot reach stops the change before anything is sent.
    """
    held = contextlib.ExitStack()
    try:
        audit = held.enter_context(
            routing_change_lock(database_url, change.app_name, wait_s=wait_s)
        )
    except RoutingLockBusy as err:
        # the refusal stands whether or not its row can be written
        with contextlib.suppress(Exception):
            record_routing_change(
                database_url,
                change.actor,
                change.app_name,
                change.alias,
                change.before,
                change.after,
                change.note,
                status=FAILED,
                version_before=change.version_before,
                version_after=change.version_after,
            )
        raise RoutingConflict(f"{err}; nothing was sent: try again") from None
    except Exception as err:  # noqa: BLE001 - any database failure: nothing was sent
        raise RoutingUpdateError(
            f"the routing audit trail cannot be reached, so nothing was sent: {_db_error(err)}"
        ) from err
    with held:
        yield audit


def begin(audit: RoutingAudit, change: Intent) -> int:
    """Write the `pending` row; without it, nothing may be sent."""
    try:
        return audit.begin(
            change.actor,
            change.alias,
            change.before,
            change.after,
            change.note,
            version_before=change.version_before,
            version_after=change.version_after,
        )
    except Exception as err:  # noqa: BLE001 - any database failure: nothing was sent
        raise RoutingUpdateError(
            f"the audit row could not be written, so nothing was sent: {_db_error(err)}"
        ) from err


@dataclasses.dataclass
class Progress:
    phase: str = "check"  # then "put", then "rollout"


@contextlib.contextmanager
def settled_on_failure(audit: RoutingAudit, audit_id: int) -> Iterator[Progress]:
    """Settle the pending row by how far the change got when something stopped it.

    BaseException too: a Ctrl-C during the rollout wait must not leave the row pending.
    Writing the outcome is best effort here: the error that stopped the change is the
    one to report, and a row left `pending` still says the change was tried.
    """
    progress = Progress()
    try:
        yield progress
    except BaseException as err:
        # an HTTP status means the server answered no (Serve's PUT, the Kubernetes
        # API's patch); a conflict means our write did not land
        refused = (
            isinstance(err, ServeAdminError | KubeApiError) and err.status_code is not None
        ) or isinstance(err, RoutingConflict)
        if progress.phase == "check" or isinstance(err, RolloutFailed):
            status = FAILED
        elif progress.phase == "put":
            status = FAILED if refused else TIMED_OUT
        else:
            status = TIMED_OUT
        with contextlib.suppress(Exception):
            audit.settle(audit_id, status)
        raise


def settle_applied(audit: RoutingAudit, audit_id: int, version: int) -> None:
    try:
        audit.settle(audit_id, APPLIED)
    except Exception as err:  # noqa: BLE001 - any database failure: say what was applied
        raise RoutingUpdateError(
            f"routing version {version} is live on every replica, but audit row #{audit_id} "
            f"could not be marked applied (it stays pending): {_db_error(err)}"
        ) from err

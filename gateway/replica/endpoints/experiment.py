"""The experiment variant a request gets, before it is routed (gateway.experiments).

One dict lookup when no experiment runs on the requested alias; otherwise one BLAKE2b
of the sticky key. The variant's weights stand in for the alias's live weights; budgets,
key scopes and rate limits apply as to any request.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from gateway.experiments.assign import Assigner
from gateway.replica.exchange import Exchange


def assign_variant(
    assigner: Assigner, ex: Exchange, requested: str, replicas: int
) -> Mapping[str, Decimal] | None:
    """The variant's weights (recorded on `ex`), or None: the alias's live weights."""
    if not assigner:
        return None
    a = ex.attribution
    sticky = {"user": a.end_user, "session": a.session_id, "request": str(ex.request_id)}
    got = assigner.assign(requested, ex.caller.app, sticky, ex.started_at, replicas)
    if got is None:
        return None
    ex.experiment = (got.experiment, got.variant)
    return got.weights

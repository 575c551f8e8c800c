"""The Routing page's logic: weights as tables, an edit turned into a validated change
(pure), and `apply_change`, the one call that sends it.

A change is validated with `gateway.domain.routing_settings.parse_routing` (the same check the
update path and `reconfigure()` make) before the confirm step, so ops never confirm a
change that would be refused. `apply_change` checks the signed-in user again on the
server before anything is sent: the page hiding the editor from a viewer is not what
stops a viewer's apply.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import pandas as pd

from dashboard.access.guard import authorize
from dashboard.access.sessions import SessionStore, SessionUser
from dashboard.auth import Permission, User
from dashboard.settings import DashboardSettings
from gateway.domain.config import Config
from gateway.domain.routing_settings import RoutingError, RoutingSettings, parse_routing

if TYPE_CHECKING:
    from gateway.control.replica_confirm import RoutingChangeResult


def alias_models(settings: RoutingSettings, cfg: Config, alias: str) -> list[str]:
    """The alias's candidates in the config and any other model the live weights name,
    sorted by name so that rows keep their place whatever order a config lists them in."""
    configured = set(cfg.aliases[alias].candidates) if alias in cfg.aliases else set()
    return sorted(configured | set(settings.aliases.get(alias, {})))


def weights_frame(settings: RoutingSettings, cfg: Config, alias: str | None = None) -> pd.DataFrame:
    rows = []
    for name in [alias] if alias else sorted(settings.aliases):
        weights = settings.aliases.get(name, {})
        total = sum(weights.values(), Decimal(0))
        for model in alias_models(settings, cfg, name):
            w = weights.get(model, Decimal(0))
            rows.append(
                {
                    "alias": name,
                    "model": model,
                    "weight": float(w),
                    "share_pct": round(float(w * 100 / total), 1) if total else 0.0,
                }
            )
    return pd.DataFrame(rows, columns=["alias", "model", "weight", "share_pct"])


def _weight(value: Any, model: str) -> Decimal:
    try:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            raise RoutingError(f"{model}: a weight is required (0 to send it nothing)")
        w = Decimal(str(value))
    except InvalidOperation:
        raise RoutingError(f"{model}: {value!r} is not a number") from None
    # 60.0 from the editor is the weight 60
    return w.quantize(Decimal(1)) if w == w.to_integral_value() else w.normalize()


@dataclasses.dataclass(frozen=True)
class PendingChange:
    alias: str
    before: dict[str, Decimal]
    after: dict[str, Decimal]

    def diff_frame(self) -> pd.DataFrame:
        models = list(dict.fromkeys([*self.before, *self.after]))
        return pd.DataFrame(
            {
                "model": models,
                "before": [str(self.before.get(m, Decimal(0))) for m in models],
                "after": [str(self.after.get(m, Decimal(0))) for m in models],
            }
        )

    def after_text(self) -> str:
        return ", ".join(f"{m}={w}" for m, w in self.after.items())


def propose_change(
    settings: RoutingSettings, cfg: Config, alias: str, edited: pd.DataFrame
) -> PendingChange:
    """The edited table as a change; RoutingError if it is invalid or changes nothing."""
    after = {
        str(m): _weight(w, str(m)) for m, w in zip(edited["model"], edited["weight"], strict=True)
    }
    before = dict(settings.aliases.get(alias, {}))
    candidate = settings.model_copy(update={"aliases": settings.aliases | {alias: after}})
    parse_routing(candidate.to_user_config(), cfg)  # raises RoutingError with the reason
    if all(after.get(m, Decimal(0)) == before.get(m, Decimal(0)) for m in {*after, *before}):
        raise RoutingError("the weights are unchanged")
    return PendingChange(alias=alias, before=before, after=after)


def apply_change(
    user: SessionUser,
    change: PendingChange,
    note: str,
    settings: DashboardSettings,
    *,
    users: Mapping[str, User] | None = None,
    store: SessionStore | None = None,
) -> RoutingChangeResult:
    """Apply a confirmed change as `user`, through the path `costgate routing set` uses.

    Raises `PermissionDenied` (nothing sent) unless `user`'s session is open and the
    configured role may change routing, for every team; `users`/`store` default to the
    configured ones (tests pass their own). The audit row names the configured user.
    """
    who = authorize(user, Permission.ROUTING_EDIT, all_teams=True, users=users, store=store)
    # imported here: the control plane's client is needed only by those who may apply
    from gateway.control.routing_update import apply_routing_change, uses_kuberay

    # on KubeRay the change patches the RayService the config names; on Serve the
    # replicas' own config (from the running app) validates it, as before
    cfg = settings.config if uses_kuberay(settings.config) else None
    return apply_routing_change(
        settings.ray_dashboard_url,
        settings.app_name,
        change.alias,
        change.after,
        actor=who.name,
        note=note or None,
        database_url=settings.database_url,
        cfg=cfg,
        gateway_url=settings.gateway_url,
    )


def _weights_text(value: Any, alias: str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        value = json.loads(value)
    if isinstance(value, dict) and alias and isinstance(value.get(alias), dict):
        value = value[alias]
    if isinstance(value, dict) and isinstance(value.get("aliases"), dict) and alias:
        value = value["aliases"].get(alias, value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def history_frame(changes: pd.DataFrame) -> pd.DataFrame:
    """who, when (UTC), which alias, before → after, note; newest first."""
    columns = ["when (UTC)", "who", "alias", "before", "after", "note"]
    if changes.empty:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame(
        {
            "when (UTC)": pd.to_datetime(changes["changed_at"], utc=True).dt.strftime(
                "%Y-%m-%d %H:%M:%S"
            ),
            "who": changes["actor"],
            "alias": changes["alias"].fillna("(all)"),
            "before": [
                _weights_text(b, a)
                for b, a in zip(changes["before"], changes["alias"], strict=True)
            ],
            "after": [
                _weights_text(b, a) for b, a in zip(changes["after"], changes["alias"], strict=True)
            ],
            "note": changes["note"].fillna(""),
        }
    )[columns]

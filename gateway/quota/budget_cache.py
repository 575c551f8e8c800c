"""The budgets' last known set, kept on local disk beside the keys' (`db.key_cache`).

A replica reloads the budgets from PostgreSQL every few seconds and keeps them through an
outage. One that starts during an outage has none loaded: rather than admit every caller
as if no budget existed, it starts from this file, the set as the last successful load of
any replica on this state dir saw it. With it, callers under no hard budget are served,
and callers under one are refused with a 503 until the store grants a slice (no replica
admits against a budget without the store's word). With no file either, every request
is a 503 `budgets_unavailable` until a load succeeds. The file holds limits and scopes
(app and team names, key ids, tags), never spend; it is readable by this user only.
"""

from __future__ import annotations

import json
import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

from db.private_files import write_private
from gateway.domain.budgets import Budget, BudgetPeriod, BudgetScope

log = logging.getLogger(__name__)

BUDGET_CACHE_FILE = "gateway-budgets.json"
_VERSION = 1


def encode_budgets(budgets: list[Budget]) -> bytes:
    rows = [
        {"id": b.id, "scope": b.scope.value, "scope_value": b.scope_value,
         "period": b.period.value, "limit_usd": str(b.limit_usd), "hard": b.hard,
         "alert_at": list(b.alert_at)}
        for b in sorted(budgets, key=lambda b: b.id)
    ]  # fmt: skip
    return json.dumps({"version": _VERSION, "budgets": rows}, sort_keys=True).encode()


def decode_budgets(data: bytes) -> list[Budget]:
    """Raises ValueError (or KeyError, TypeError) when `data` is not a set of this version."""
    doc: Any = json.loads(data)
    if not isinstance(doc, dict) or doc.get("version") != _VERSION:
        raise ValueError("not a budget cache of this version")
    return [
        Budget(id=int(r["id"]), scope=BudgetScope(r["scope"]), scope_value=str(r["scope_value"]),
               period=BudgetPeriod(r["period"]), limit_usd=Decimal(r["limit_usd"]),
               hard=bool(r["hard"]), alert_at=tuple(int(a) for a in r["alert_at"]))
        for r in doc["budgets"]
    ]  # fmt: skip


class BudgetCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._written: bytes | None = None

    def save(self, budgets: list[Budget]) -> None:
        data = encode_budgets(budgets)
        if data == self._written:
            return
        try:
            write_private(self.path, data)
        except OSError as err:
            log.warning("cannot keep the budgets' cache: %s", type(err).__name__)
            return
        self._written = data

    def load(self) -> list[Budget] | None:
        """The last known set, or None (no file, or one that cannot be read)."""
        try:
            return decode_budgets(self.path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.warning("budgets' cache unreadable: %s", type(err).__name__)
            return None

"""Which fault, if any, a request to the simulator suffers.

Pure state: the server draws one uniform number per request and asks the table. The
probabilities of one model's kinds add up, in the order they were set, over that one
draw, so 5% rate_limit + 5% error_503 fails 10% of requests, half with each; kinds set
on "*" apply to models with no rule of that kind. A rule with a `count` stops firing
after that many requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.devtools.sim.settings import ANY_MODEL, FaultKind, FaultSpec


@dataclass
class ActiveFault:
    model: str
    kind: str
    spec: FaultSpec
    fired: int = 0

    @property
    def spent(self) -> bool:
        return self.spec.count is not None and self.fired >= self.spec.count

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "kind": self.kind, **self.spec.model_dump(),
                "fired": self.fired}


class FaultTable:
    def __init__(self, configured: Mapping[str, Mapping[FaultKind, FaultSpec]] | None = None):
        self._configured = {m: dict(kinds) for m, kinds in (configured or {}).items()}
        self._rules: dict[str, dict[str, ActiveFault]] = {}
        self.reset()

    def reset(self) -> None:
        """Back to the faults of the configuration file."""
        self._rules = {
            model: {kind: ActiveFault(model, kind, spec) for kind, spec in kinds.items()}
            for model, kinds in self._configured.items()
        }

    def set(self, model: str, kind: str, spec: FaultSpec) -> ActiveFault:
        rule = ActiveFault(model, kind, spec)
        kinds = self._rules.setdefault(model, {})
        kinds.pop(kind, None)  # a re-set kind moves to the end of the draw order
        kinds[kind] = rule
        return rule

    def clear(self, model: str | None = None, kind: str | None = None) -> None:
        if model is None:
            self._rules = {}
            return
        kinds = self._rules.get(model, {})
        if kind is None:
            kinds.clear()
        else:
            kinds.pop(kind, None)
        if not kinds:
            self._rules.pop(model, None)

    def draw(self, model: str, r: float) -> ActiveFault | None:
        """The fault for a request to `model`, given r drawn uniformly from [0, 1)."""
        if not self._rules:
            return None
        own = self._rules.get(model, {})
        shared = self._rules.get(ANY_MODEL, {}) if model != ANY_MODEL else {}
        cumulative = 0.0
        for rules in (own, shared):
            for kind, rule in rules.items():
                if rules is shared and kind in own:
                    continue
                if rule.spent:
                    continue
                cumulative += rule.spec.probability
                if r < cumulative:
                    rule.fired += 1
                    return rule
        return None

    def snapshot(self) -> list[dict[str, Any]]:
        return [rule.as_dict() for kinds in self._rules.values() for rule in kinds.values()]

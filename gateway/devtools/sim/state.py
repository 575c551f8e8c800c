"""The simulator's shared state: settings, faults, counters, overrides; one per app."""

from __future__ import annotations

import random
from typing import cast

import uvicorn
from starlette.requests import Request

from gateway.devtools.sim.behaviour import PromptCache
from gateway.devtools.sim.faults import FaultTable
from gateway.devtools.sim.settings import Behaviour, BehaviourOverride, SimSettings
from gateway.devtools.sim.stats import SimStats


class SimState:
    """Everything the routes share; one per app, touched only from the event loop."""

    def __init__(self, settings: SimSettings, served_models: tuple[str, ...]):
        self.settings = settings
        self.served = frozenset(served_models)
        self.model_ids = list(served_models)
        self.faults = FaultTable(settings.faults)
        self.stats = SimStats()
        self.prompt_cache = PromptCache(settings.prompt_cache_min_tokens)
        self.rng = random.Random(settings.seed)
        self.overrides: dict[str, BehaviourOverride] = {}
        self._behaviours: dict[str, Behaviour] = {}
        self.server: uvicorn.Server | None = None

    def behaviour(self, model: str) -> Behaviour:
        found = self._behaviours.get(model)
        if found is None:
            found = self.settings.behaviour(model).merged(self.overrides.get(model))
            self._behaviours[model] = found
        return found

    def override(self, model: str, override: BehaviourOverride | None) -> None:
        if override is None:
            self.overrides.pop(model, None)
        else:
            old = self.overrides.get(model)
            merged = {**(old.model_dump(exclude_none=True) if old else {}),
                      **override.model_dump(exclude_none=True)}
            self.overrides[model] = BehaviourOverride(**merged)
        self._behaviours.clear()

    def reset(self) -> None:
        self.faults.reset()
        self.stats.reset()
        self.prompt_cache.clear()
        self.overrides.clear()
        self._behaviours.clear()

    def connections_open(self) -> int | None:
        return len(self.server.server_state.connections) if self.server else None


def sim_state(request: Request) -> SimState:
    # app.state is Starlette's untyped namespace; build_app puts the SimState there
    return cast(SimState, request.app.state.sim)

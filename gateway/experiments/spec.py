"""An experiment as it lives in the routing settings (Serve `user_config`): plain JSON,
validated before it is sent, frozen once a replica holds it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Stick = Literal["user", "session", "request"]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    alias: str
    # variant -> its weights for the alias (model -> relative weight); the first is control
    variants: dict[str, dict[str, Decimal]]
    split: dict[str, int]  # variant -> its share of the alias's traffic
    stick: Stick = "user"
    apps: tuple[str, ...] | None = None  # None: every app's traffic
    started_at: dt.datetime
    until: dt.datetime | None = None  # stops assigning at this time
    max_requests: int | None = Field(default=None, ge=1)  # stops after about this many
    stopped_at: dt.datetime | None = None  # kept for its results; assigns nothing
    promoted: str | None = None  # the variant whose weights the alias took

    @model_validator(mode="after")
    def _coherent(self) -> Experiment:
        if len(self.variants) < 2:
            raise ValueError("an experiment needs at least two variants")
        if set(self.split) != set(self.variants):
            raise ValueError("split must give a share to every variant, and only to them")
        if any(s < 0 for s in self.split.values()) or sum(self.split.values()) <= 0:
            raise ValueError("split shares must be >= 0 with at least one above 0")
        for name, weights in self.variants.items():
            if not weights or any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
                raise ValueError(f"variant {name}: weights must be >= 0, one above 0")
        if self.promoted is not None and self.promoted not in self.variants:
            raise ValueError(f"promoted: unknown variant {self.promoted!r}")
        return self

    @property
    def control(self) -> str:
        return next(iter(self.variants))

    def running(self, now: dt.datetime) -> bool:
        return self.stopped_at is None and (self.until is None or now < self.until)


def parse_variant(text: str) -> tuple[str, dict[str, Decimal]]:
    """`a=gpt-4o-mini` or `b=deepseek-v3.2:70,gpt-4o-mini:30` (the CLI's form)."""
    name, sep, mix = text.partition("=")
    if not sep or not name.strip() or not mix.strip():
        raise ValueError(f"{text!r}: expected NAME=MODEL or NAME=MODEL:WEIGHT,MODEL:WEIGHT")
    weights: dict[str, Decimal] = {}
    for part in mix.split(","):
        model, colon, raw = part.strip().rpartition(":") if ":" in part else (part, "", "1")
        model = model.strip()
        try:
            weight = Decimal(raw.strip())
        except ArithmeticError:
            raise ValueError(f"{part!r}: weight {raw!r} is not a number") from None
        if not model or not weight.is_finite() or model in weights:
            raise ValueError(f"{part!r}: expected MODEL or MODEL:WEIGHT, each model once")
        weights[model] = weight
    return name.strip(), weights

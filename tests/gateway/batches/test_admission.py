"""A batch's admission: scope per line, one provider, the worst case at the batch price
(the example config's prices). Its refusal by a budget is tested through the gateway
(test_openai_batches_served.py): budgets need their store."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest

from gateway.batches.admission import admit_batch
from gateway.batches.lines import BatchLine
from gateway.domain.config import load_config
from gateway.domain.openai_errors import OpenAIError
from gateway.domain.pricing import PriceCatalog
from gateway.quota.guard import QuotaGuard
from gateway.quota.worst_case import WorstCasePricer

CFG = load_config(Path(__file__).resolve().parents[3] / "config" / "costgate.example.yaml")
PRICER = WorstCasePricer(CFG, PriceCatalog.from_config(CFG))


@dataclasses.dataclass(frozen=True)
class Scope:
    models: frozenset[str] | None = None
    max_output_tokens: int | None = None
    admin: bool = False
    max_n: int | None = None


@dataclasses.dataclass(frozen=True)
class Caller:
    app: str = "shop"
    team: str | None = None
    key_id: uuid.UUID | None = None
    scope: Scope = Scope()
    rpm_limit: int | None = None
    tpm_limit: int | None = None


def _line(n: int, model: str, max_tokens: int = 100) -> BatchLine:
    return BatchLine(n, f"c{n}", model, {"model": model, "max_tokens": max_tokens,
                                         "messages": [{"role": "user", "content": "hi"}]})


def _plan(requested: str) -> tuple[str, ...]:
    if requested not in CFG.models_by_name:
        raise OpenAIError(404, f"The model {requested!r} does not exist.")
    return (requested, *CFG.models_by_name[requested].fallbacks)


async def _admit(caller: Caller, lines: list[BatchLine], quota: QuotaGuard | None = None,
                 api: str = "openai"):  # type: ignore[no-untyped-def]
    return await admit_batch(api, caller, lines, cfg=CFG, plan=_plan, pricer=PRICER,
                             quota=quota or QuotaGuard(shared=False))


async def test_the_worst_case_is_every_lines_at_half_the_live_price() -> None:
    lines = [_line(1, "gpt-4o-mini"), _line(2, "gpt-4.1")]
    admitted = await _admit(Caller(), lines)
    assert admitted.provider.name == "openai"
    assert admitted.models == {"c1": "gpt-4o-mini", "c2": "gpt-4.1"}
    live = [PRICER.price([m], line.body["messages"], max_tokens=100).cost_usd
            for m, line in zip(("gpt-4o-mini", "gpt-4.1"), lines, strict=True)]
    assert admitted.reserved_usd == (live[0] + live[1]) / 2


async def test_a_line_outside_the_keys_scope_or_unroutable_is_a_400_naming_it() -> None:
    scoped = Caller(scope=Scope(models=frozenset({"gpt-4o-mini"})))
    with pytest.raises(OpenAIError) as refused:
        await _admit(scoped, [_line(1, "gpt-4o-mini"), _line(2, "gpt-4.1")])
    assert (refused.value.status, refused.value.code) == (400, "model_not_allowed")
    assert refused.value.message.startswith("line 2 (custom_id 'c2')")
    with pytest.raises(OpenAIError, match="line 1.*does not exist"):
        await _admit(Caller(), [_line(1, "no-such-model")])
    # an OpenAI batch goes to one openai-kind provider: a Claude line cannot join it
    with pytest.raises(OpenAIError, match="line 2.*cannot be served by openai"):
        await _admit(Caller(), [_line(1, "gpt-4o-mini"), _line(2, "claude-haiku-4.5")])

"""A batch's admission, line by line, as a live request's would be: the key's scope, the
route, the provider, and the budget's reservation of the batch's worst case at the batch
price. A refusal names the line; nothing reaches a provider before all of it passed."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Protocol

from gateway.domain.config import Config, Provider
from gateway.domain.openai_errors import OpenAIError
from gateway.quota.guard import Admission, QuotaGuard, Who
from gateway.quota.refusals import budgets_unavailable
from gateway.quota.worst_case import WorstCase, WorstCasePricer

from .lines import BatchLine, line_error
from .pricing import batch_factor, batch_worst_case

# which provider kinds speak each batch API natively
API_KINDS = {"openai": "openai", "anthropic": "anthropic"}


class Scope(Protocol):
    @property
    def models(self) -> frozenset[str] | None: ...
    @property
    def max_output_tokens(self) -> int | None: ...
    @property
    def admin(self) -> bool: ...
    @property
    def max_n(self) -> int | None: ...


class BatchCaller(Protocol):
    """What of the gateway's `Caller` a batch looks at."""

    @property
    def app(self) -> str: ...
    @property
    def team(self) -> str | None: ...
    @property
    def key_id(self) -> uuid.UUID | None: ...
    @property
    def scope(self) -> Scope: ...
    @property
    def rpm_limit(self) -> int | None: ...
    @property
    def tpm_limit(self) -> int | None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Admitted:
    provider: Provider
    models: dict[str, str]  # custom id -> the public model that serves the line
    upstream: dict[str, str]  # custom id -> the provider's model id
    reserved_usd: Decimal | None
    admission: Admission | None


def _check_scope(caller: BatchCaller, line: BatchLine) -> None:
    if caller.scope.admin:
        raise OpenAIError(403, "An admin gateway key cannot call models; use an app's key.",
                          code="admin_key_not_for_models")  # fmt: skip
    allowed = caller.scope.models
    if allowed is not None and line.model not in allowed:
        err = line_error(line.number, f"this key may not use the model {line.model[:80]!r}",
                         line.custom_id)  # fmt: skip
        err.code = "model_not_allowed"
        raise err
    most_n = caller.scope.max_n
    if most_n is not None and _outputs(line) > most_n:
        raise line_error(line.number, f"`n` is {_outputs(line)}; this key allows at most "
                         f"{most_n}", line.custom_id)  # fmt: skip
    cap = caller.scope.max_output_tokens
    if cap is not None and line.max_tokens is not None and line.max_tokens > cap:
        raise line_error(line.number, f"max_tokens is {line.max_tokens}; this key allows at "
                         f"most {cap}", line.custom_id)  # fmt: skip


def _outputs(line: BatchLine) -> int:
    """The outputs billed for the line's one prompt (`n`)."""
    n = line.body.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1


def _route(plan: Callable[[str], tuple[str, ...]], line: BatchLine) -> tuple[str, ...]:
    try:
        return plan(line.model)
    except OpenAIError as err:
        raise line_error(line.number, err.message, line.custom_id) from None


async def admit_batch(
    api: str,
    caller: BatchCaller,
    lines: list[BatchLine],
    *,
    cfg: Config,
    plan: Callable[[str], tuple[str, ...]],
    pricer: WorstCasePricer,
    quota: QuotaGuard,
) -> Admitted:
    """Every line held to the key and routed; one provider for the batch (the route's
    first choice for the first line that the API can reach), each line's first planned
    model there; the worst case reserved on the caller's budgets (a 429 when short)."""
    kind = API_KINDS[api]
    provider: Provider | None = None
    models: dict[str, str] = {}
    for line in lines:
        _check_scope(caller, line)
        planned = _route(plan, line)
        if provider is None:
            for name in planned:
                candidate = cfg.provider(cfg.models_by_name[name].provider)
                if candidate.kind == kind:
                    provider = candidate
                    break
            else:
                raise line_error(line.number, f"no route for {line.model[:80]!r} reaches a "
                                 f"provider with {api}'s batch API", line.custom_id)
        there = [m for m in planned if cfg.models_by_name[m].provider == provider.name]
        if not there:
            raise line_error(line.number, f"{line.model[:80]!r} cannot be served by "
                             f"{provider.name}, where this batch goes", line.custom_id)
        models[line.custom_id] = there[0]
    assert provider is not None  # lines are never empty
    factor = batch_factor(provider)
    prompt_tokens = output_tokens = 0
    costs: list[Decimal | None] = []
    for line in lines:
        worst = pricer.price([models[line.custom_id]], line.body.get("messages"),
                             max_tokens=line.max_tokens, key_cap=caller.scope.max_output_tokens,
                             outputs=_outputs(line))  # fmt: skip
        prompt_tokens += worst.prompt_tokens
        output_tokens += worst.output_tokens or 0
        costs.append(worst.cost_usd)
    total = batch_worst_case(costs, factor)
    who = Who(caller.app, caller.team, None if caller.key_id is None else str(caller.key_id),
              caller.rpm_limit, caller.tpm_limit)  # fmt: skip
    admission = None
    if not quota.loaded:
        raise budgets_unavailable()  # any caller may be under a budget not yet known
    if quota.applies(who):
        worst = WorstCase(prompt_tokens, output_tokens, total,
                          "" if total is not None else "a line has no price or output bound")
        admission = await quota.admit(who, worst)
    upstream = {cid: cfg.models_by_name[m].upstream_model for cid, m in models.items()}
    return Admitted(provider, models, upstream, total, admission)


def line_models(lines: list[BatchLine], admitted: Admitted) -> list[Mapping[str, str]]:
    """What the batch row keeps of each line: its custom id, what the app asked for, and
    the model that serves it (what its row is priced by)."""
    return [{"custom_id": line.custom_id, "requested": line.model,
             "model": admitted.models[line.custom_id]} for line in lines]  # fmt: skip

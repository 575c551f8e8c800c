"""What every scenario shares: its sizes, its context (the stack, its own app and key),
and turning what the clients saw plus the ledger's rows into a `ScenarioResult`.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import inspect
import time
from collections.abc import Callable, Mapping, Sequence

import httpx

from gateway.devtools.chaos.ledger import Accounting, fetch_rows, settle
from gateway.devtools.chaos.load import LoadRun, LoadSpec, Outcome
from gateway.devtools.chaos.report import ScenarioResult, controller_events
from gateway.devtools.chaos.stack import ChaosStack
from gateway.ledger.writer import RecordWriter

# the writer's timer: a SIGKILL may take at most this much of the latest rows with it
FLUSH_INTERVAL_S = float(inspect.signature(RecordWriter).parameters["flush_interval_s"].default)


@dataclasses.dataclass(frozen=True)
class Sizes:
    rps: float = 25.0
    load_s: float = 20.0  # load around a kill, a `down`, a redeploy, the faults
    outage_s: float = 60.0  # how long PostgreSQL stays cut
    fuzz_examples: int = 60  # per operation and generation mode
    big_body_mib: int = 64
    settle_s: float = 60.0  # how long rows may take to arrive before they count as lost
    spool_disk_kib: int = 128
    fault_rate: float = 0.2


DEFAULT = Sizes()
# the smallest run that still exercises each path: for tests. The giant body stays at
# full size: it costs well under a second (the replica refuses it at its limit)
QUICK = Sizes(rps=10, load_s=6, outage_s=5, fuzz_examples=4, settle_s=45,
              spool_disk_kib=32)  # fmt: skip


@dataclasses.dataclass
class Context:
    stack: ChaosStack
    sizes: Sizes
    run_id: str
    log: Callable[[str], None] = print
    keys: dict[str, str] = dataclasses.field(default_factory=dict)

    def app(self, scenario: str) -> str:
        return f"chaos-{scenario}-{self.run_id}"

    def key(self, scenario: str) -> str:
        if scenario not in self.keys:
            self.keys[scenario] = self.stack.new_key(self.app(scenario))
        return self.keys[scenario]

    def warm_keys(self) -> None:
        """Make every replica know every key before anything breaks: a replica refreshes
        its keys from PostgreSQL, which the outage scenarios take away."""
        for key in self.keys.values():
            for _ in range(6):  # HAProxy spreads these over the replicas
                httpx.get(f"{self.stack.gateway_url}/v1/models", timeout=10,
                          headers={"authorization": f"Bearer {key}"})

    def load(self, scenario: str, *, duration_s: float, rps: float | None = None,
             tag: str = "", **spec: object) -> LoadRun:
        rate = rps if rps is not None else self.sizes.rps
        load = LoadSpec(requests=int(rate * duration_s) + 1, duration_s=duration_s, rps=rate,
                        **spec)  # type: ignore[arg-type]
        prefix = f"{scenario}{'-' + tag if tag else ''}"
        return LoadRun(self.stack.gateway_url, self.key(scenario), load, prefix).start()


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def finish(ctx: Context, name: str, outcomes: Sequence[Outcome], since: dt.datetime,
           started: float, *, settle_s: float | None = None) -> tuple[ScenarioResult, Accounting]:
    """Wait for the ledger to catch up, then count; notes say what is not in the columns."""
    assert ctx.stack.ledger is not None
    url, app = ctx.stack.ledger.url, ctx.app(name)
    acc, waited = settle(outcomes, lambda: fetch_rows(url, app, since - dt.timedelta(seconds=5)),
                         timeout_s=settle_s if settle_s is not None else ctx.sizes.settle_s)
    result = ScenarioResult(
        name, sent=acc.sent, answered_2xx=acc.answered_2xx, answered_4xx=acc.answered_4xx,
        answered_5xx=acc.answered_5xx, no_answer=acc.no_answer, rows=acc.rows,
        lost=acc.lost_count, duplicated=acc.duplicated, differing=len(acc.differing),
        seconds=time.monotonic() - started,
    )
    statuses = collections.Counter(o.status or "none" for o in outcomes)
    result.notes.append(f"answers {dict(sorted(statuses.items(), key=str))}; "
                        f"ledger checked {waited:.0f} s after the load")
    answers = {o.request_id: o for o in outcomes if o.request_id}
    if acc.lost:
        result.notes.append(f"lost request ids (first 5 of {acc.lost_count}): "
                            f"{', '.join(acc.lost[:5])}")
        result.notes.extend(_lost_details(ctx, answers, acc, since))
    if acc.differing:
        shown = [f"{rid} (answer {answers[rid].status}{' stream' if answers[rid].stream else ''}"
                 f"{', ' + str(answers[rid].error) if answers[rid].error else ''})"
                 for rid in acc.differing[:5]]  # fmt: skip
        result.notes.append(f"rows differing from the answer: {', '.join(shown)}")
    if acc.broken_streams:
        result.notes.append(f"{acc.broken_streams} streams broke after their 200; their rows "
                            "record the failure")
    if acc.missing_error_rows:
        result.notes.append(f"{len(acc.missing_error_rows)} error answers with an id but no row: "
                            f"{', '.join(acc.missing_error_rows[:3])}")
    if acc.unmatched_rows:
        result.notes.append(f"{acc.unmatched_rows} rows of requests that got no id back "
                            f"({acc.without_id} such requests)")
    t0 = since.timestamp()
    for status in sorted({o.status for o in outcomes if o.status and o.status >= 400}):
        times = [o.started - t0 for o in outcomes if o.status == status]
        result.notes.append(f"{len(times)} answers {status}, sent {min(times):.1f} s to "
                            f"{max(times):.1f} s into the scenario")
    errors = sorted({o.error for o in outcomes if o.error})
    if errors:
        result.notes.append(f"client errors: {', '.join(errors)}")
    return result, acc


def _lost_details(ctx: Context, answers: Mapping[str, Outcome], acc: Accounting,
                  since: dt.datetime) -> list[str]:
    """What is known of lost rows' requests (`answers`: by request id), and what Serve's
    controller did to replicas meanwhile: the next failure then says where to look."""
    t0 = since.timestamp()
    shown = [f"{rid} ({'stream' if o.stream else 'not streamed'}, sent +{o.started - t0:.1f} s, "
             f"answered +{o.ended - t0:.1f} s)"
             for rid in acc.lost[:5] if (o := answers.get(rid)) is not None]  # fmt: skip
    notes = [f"lost requests: {', '.join(shown)}"] if shown else []
    events = controller_events(ctx.stack.controller_log(), t0)
    notes.append(f"Serve's controller on replicas meanwhile: {'; '.join(events[-5:]) or 'nothing'}")
    return notes


def expect(result: ScenarioResult, ok: bool, failure: str) -> None:
    if not ok:
        result.failures.append(failure)


def expect_intact(result: ScenarioResult, acc: Accounting) -> None:
    """No answered request without its row, no row twice, no row telling another story."""
    expect(result, acc.lost_count == 0, f"{acc.lost_count} answered 2xx requests have no row")
    expect(result, acc.duplicated == 0, f"{acc.duplicated} duplicated rows")
    expect(result, not acc.differing, f"{len(acc.differing)} rows differ from their answers")

"""Every metric the gateway exports: name, type, help, label names and buckets.

One table is the single source of truth for three readers: the replicas (which label
values they fill in), the hub (how it renders each family) and the deploy tests (every
metric a Grafana panel queries must be one of `exported_sample_names()`).

Money counters are in USD, tokens are counted by kind, durations are in seconds, all as
Prometheus naming conventions want (base units, `_total` on counters). Cost, tokens and
durations are values, never labels; label values are bounded (configured names, status
classes, a small error vocabulary; never request ids, keys or free text).
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum


class Kind(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


# LLM calls take from tens of milliseconds (a cached or tiny answer) to minutes (a long
# generation); buckets spaced roughly ×2 keep p50/p95/p99 estimates within a bucket's width.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0,
)  # fmt: skip
# Time to first token is shorter: a finer grid below one second.
TTFT_BUCKETS_S: tuple[float, ...] = (
    0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0,
)  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class MetricDef:
    name: str  # without `_total`: prometheus_client appends it to counters
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()

    def sample_names(self) -> tuple[str, ...]:
        """The names that appear in the text exposition (and so in PromQL)."""
        if self.kind is Kind.COUNTER:
            return (f"{self.name}_total",)
        if self.kind is Kind.HISTOGRAM:
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


_REQ = ("model", "provider", "alias", "app")

REQUESTS = MetricDef(
    "costgate_requests", Kind.COUNTER,
    "Client requests answered, by the model that answered, the API called (endpoint: "
    "chat.completions, completions, embeddings, responses, messages) and the HTTP status "
    "class (2xx, 4xx, 5xx; 'cancelled' when the client went away mid-stream).",
    (*_REQ, "endpoint", "status_class"),
)  # fmt: skip
REQUEST_ERRORS = MetricDef(
    "costgate_request_errors", Kind.COUNTER,
    "Client requests that failed, by error reason (a bounded vocabulary).",
    ("model", "provider", "reason"),
)  # fmt: skip
TOKENS = MetricDef(
    "costgate_tokens", Kind.COUNTER,
    "Tokens by kind: prompt, cached_prompt (part of prompt), completion, "
    "reasoning (part of completion).",
    (*_REQ, "kind"),
)  # fmt: skip
COST_USD = MetricDef(
    "costgate_cost_usd", Kind.COUNTER,
    "What the providers billed, in USD (after their currency's FX rate).",
    _REQ,
)  # fmt: skip
LIST_COST_USD = MetricDef(
    "costgate_list_cost_usd", Kind.COUNTER,
    "The same tokens at official list prices, in USD.",
    _REQ,
)  # fmt: skip
BASELINE_COST_USD = MetricDef(
    "costgate_baseline_cost_usd", Kind.COUNTER,
    "The same tokens at the alias's baseline model's list prices, in USD "
    "(routing savings = baseline - list).",
    _REQ,
)  # fmt: skip
SAVINGS_USD = MetricDef(
    "costgate_savings_usd", Kind.COUNTER,
    "List-price cost minus billed cost, in USD, summed over requests billed below list.",
    _REQ,
)  # fmt: skip
NEGATIVE_SAVINGS_USD = MetricDef(
    "costgate_negative_savings_usd", Kind.COUNTER,
    "Billed cost minus list-price cost, in USD, summed over requests billed above list "
    "(net savings = savings - negative_savings; a counter cannot go down).",
    _REQ,
)  # fmt: skip
UNPRICED_REQUESTS = MetricDef(
    "costgate_unpriced_requests", Kind.COUNTER,
    "Requests whose cost is unknown (usage missing): their cost is not in the USD "
    "counters, never counted as $0.",
    ("model", "provider"),
)  # fmt: skip
REQUEST_DURATION = MetricDef(
    "costgate_request_duration_seconds", Kind.HISTOGRAM,
    "Whole request time at the gateway, from the request to the last byte.",
    ("model", "provider", "status_class"),
    LATENCY_BUCKETS_S,
)  # fmt: skip
TTFT = MetricDef(
    "costgate_time_to_first_token_seconds", Kind.HISTOGRAM,
    "Time from the request to the first token sent to the client.",
    ("model", "provider"),
    TTFT_BUCKETS_S,
)  # fmt: skip
UPSTREAM_ATTEMPTS = MetricDef(
    "costgate_upstream_attempts", Kind.COUNTER,
    "Calls to upstream providers, by outcome (ok or an error reason).",
    ("model", "provider", "outcome"),
)  # fmt: skip
RETRIES = MetricDef(
    "costgate_retries", Kind.COUNTER,
    "Upstream attempts after the first one for the same model, by the reason for retrying.",
    ("model", "provider", "reason"),
)  # fmt: skip
FALLBACKS = MetricDef(
    "costgate_fallbacks", Kind.COUNTER,
    "Requests moved from one model to its fallback.",
    ("from_model", "to_model"),
)  # fmt: skip
BREAKER_STATE = MetricDef(
    "costgate_circuit_breaker_state", Kind.GAUGE,
    "Circuit breaker per upstream: 0 closed, 1 open, 2 half-open; the most severe state "
    "over live replicas (open over half-open over closed). Breakers are per replica, not "
    "shared: each opens on the failures it sees itself (costgate_circuit_breaker_replicas).",
    ("provider", "model"),
)  # fmt: skip
BREAKER_REPLICAS = MetricDef(
    "costgate_circuit_breaker_replicas", Kind.GAUGE,
    "Live replicas whose breaker for this upstream is in this state (each replica keeps "
    "its own breakers, on every node).",
    ("provider", "model", "state"),
)  # fmt: skip
ROUTING_WEIGHT = MetricDef(
    "costgate_routing_weight", Kind.GAUGE,
    "Configured relative weight of a model within an alias (the live user_config).",
    ("alias", "model"),
)  # fmt: skip
IN_FLIGHT = MetricDef(
    "costgate_requests_in_flight", Kind.GAUGE,
    "Client requests being served now, over live replicas.",
)  # fmt: skip
WRITER_QUEUED = MetricDef(
    "costgate_record_writer_queued_rows", Kind.COUNTER,
    "Usage rows handed to the record writers.",
)  # fmt: skip
WRITER_WRITTEN = MetricDef(
    "costgate_record_writer_written_rows", Kind.COUNTER,
    "Usage rows committed to PostgreSQL.",
)  # fmt: skip
WRITER_SPOOLED = MetricDef(
    "costgate_record_writer_spooled_rows", Kind.COUNTER,
    "Usage rows spilled to the local spool file while the database was away.",
)  # fmt: skip
WRITER_DROPPED = MetricDef(
    "costgate_record_writer_dropped_rows", Kind.COUNTER,
    "Usage rows lost (every bound exceeded); should stay at 0.",
)  # fmt: skip
WRITER_BUFFER = MetricDef(
    "costgate_record_writer_buffer_rows", Kind.GAUGE,
    "Usage rows waiting in memory, over live replicas.",
)  # fmt: skip
WRITER_SPOOL = MetricDef(
    "costgate_record_writer_spool_rows", Kind.GAUGE,
    "Usage rows waiting in spool files (adopted ones of dead replicas included), over live "
    "replicas.",
)  # fmt: skip
WRITER_ALIVE = MetricDef(
    "costgate_record_writer_alive", Kind.GAUGE,
    "Live replicas whose record writer runs (its loops beat); each replica has its own "
    "writer and spool, so a value below the replica count names a sick one.",
)  # fmt: skip
WRITER_RESTARTS = MetricDef(
    "costgate_record_writer_restarts", Kind.COUNTER,
    "Times a record writer's loop failed with an unexpected error and was restarted.",
)  # fmt: skip
WRITER_QUARANTINED = MetricDef(
    "costgate_record_writer_quarantined_lines", Kind.COUNTER,
    "Spool lines that were not usage records (corrupt, torn or invalid), set aside in a "
    "quarantine file instead of the ledger.",
)  # fmt: skip
WRITER_SPOOL_ERRORS = MetricDef(
    "costgate_record_writer_spool_write_errors", Kind.COUNTER,
    "Spool writes that failed (disk full, I/O error); their rows stayed in memory.",
)  # fmt: skip
WRITER_JOURNAL_ERRORS = MetricDef(
    "costgate_record_writer_journal_errors", Kind.COUNTER,
    "Journal writes that failed; that replica's journal stopped, so a kill of it may lose "
    "the rows of answered requests it still held in memory.",
)  # fmt: skip
REPORTING_REPLICAS = MetricDef(
    "costgate_metrics_reporting_replicas", Kind.GAUGE,
    "Replicas whose latest snapshot is fresh enough for their gauges to count.",
)  # fmt: skip
CACHE_LOOKUPS = MetricDef(
    "costgate_cache_lookups", Kind.COUNTER,
    "Response-cache lookups by result (hit, miss); the hit ratio is hits over all lookups. "
    "Requests not opted in are not looked up.",
    ("result",),
)  # fmt: skip
CACHE_BYPASSES = MetricDef(
    "costgate_cache_bypasses", Kind.COUNTER,
    "Opted-in requests that skipped the lookup (Cache-Control: no-cache or max-age=0).",
)  # fmt: skip
CACHE_SKIPS = MetricDef(
    "costgate_cache_skips", Kind.COUNTER,
    "Cache operations given up, by reason: error (Redis failed or timed out), skipped "
    "(Redis left alone after a failure), unreadable (an entry that did not parse), "
    "too_large (an answer over max_entry_bytes, not stored). The request went on.",
    ("reason",),
)  # fmt: skip
CACHE_STORED = MetricDef(
    "costgate_cache_stores", Kind.COUNTER, "Answers stored in the response cache.",
)  # fmt: skip
CACHE_BYTES = MetricDef(
    "costgate_cache_bytes", Kind.COUNTER,
    "Bytes of cache entries, by direction: stored (written) or served (read on a hit).",
    ("direction",),
)  # fmt: skip
CACHE_INDEX = MetricDef(
    "costgate_cache_index", Kind.COUNTER,
    "The shared cache's key index in each replica, by event: learned (keys heard from a "
    "store, any replica's, or loaded when it started listening), absent (misses answered "
    "without asking the table).",
    ("event",),
)  # fmt: skip
CACHE_HELD_BYTES = MetricDef(
    "costgate_cache_held_bytes", Kind.GAUGE,
    "Bytes held by the replicas' in-memory caches (0 with Redis: it is Redis's memory).",
)  # fmt: skip

ALL_METRICS: tuple[MetricDef, ...] = (
    REQUESTS, REQUEST_ERRORS, TOKENS, COST_USD, LIST_COST_USD, BASELINE_COST_USD,
    SAVINGS_USD, NEGATIVE_SAVINGS_USD, UNPRICED_REQUESTS, REQUEST_DURATION, TTFT,
    UPSTREAM_ATTEMPTS, RETRIES, FALLBACKS, BREAKER_STATE, BREAKER_REPLICAS, ROUTING_WEIGHT,
    IN_FLIGHT, WRITER_QUEUED, WRITER_WRITTEN, WRITER_SPOOLED, WRITER_DROPPED, WRITER_BUFFER,
    WRITER_SPOOL, WRITER_ALIVE, WRITER_RESTARTS, WRITER_QUARANTINED, WRITER_SPOOL_ERRORS,
    WRITER_JOURNAL_ERRORS, REPORTING_REPLICAS,
    CACHE_LOOKUPS, CACHE_BYPASSES, CACHE_SKIPS, CACHE_STORED, CACHE_BYTES, CACHE_HELD_BYTES,
    CACHE_INDEX,
)  # fmt: skip
METRICS_BY_NAME: dict[str, MetricDef] = {m.name: m for m in ALL_METRICS}

# set_writer_stats() keys -> the metric each feeds; other keys are ignored
WRITER_STAT_METRICS: dict[str, MetricDef] = {
    "queued": WRITER_QUEUED,
    "written": WRITER_WRITTEN,
    "spooled": WRITER_SPOOLED,
    "dropped": WRITER_DROPPED,
    "buffer_depth": WRITER_BUFFER,
    "spool_depth": WRITER_SPOOL,
    "restarts": WRITER_RESTARTS,
    "quarantined": WRITER_QUARANTINED,
    "spool_write_errors": WRITER_SPOOL_ERRORS,
    "journal_errors": WRITER_JOURNAL_ERRORS,
}

# what the ingress adds from the writer's health() to its stats() for set_writer_stats()
WRITER_HEALTH_METRICS: dict[str, MetricDef] = {"alive": WRITER_ALIVE}

# set_cache_stats() keys (gateway.replica.cache.gate's counts) -> the series each feeds
CACHE_STAT_SERIES: dict[str, tuple[MetricDef, tuple[str, ...]]] = {
    "hit": (CACHE_LOOKUPS, ("hit",)),
    "miss": (CACHE_LOOKUPS, ("miss",)),
    "bypass": (CACHE_BYPASSES, ()),
    "errors": (CACHE_SKIPS, ("error",)),
    "skipped": (CACHE_SKIPS, ("skipped",)),
    "unreadable": (CACHE_SKIPS, ("unreadable",)),
    "too_large": (CACHE_SKIPS, ("too_large",)),
    "stored": (CACHE_STORED, ()),
    "bytes_stored": (CACHE_BYTES, ("stored",)),
    "bytes_served": (CACHE_BYTES, ("served",)),
    "bytes": (CACHE_HELD_BYTES, ()),
    "absent": (CACHE_INDEX, ("absent",)),
    "learned": (CACHE_INDEX, ("learned",)),
}

BREAKER_STATES = {0: "closed", 1: "open", 2: "half_open"}


def exported_sample_names() -> frozenset[str]:
    return frozenset(n for m in ALL_METRICS for n in m.sample_names())

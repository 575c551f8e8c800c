"""A budget threshold as a webhook: the JSON body (pure) and its delivery, retried.

The body is what a Slack incoming webhook accepts (`text`, which Slack shows) plus the
same facts as structured fields under `costgate` (which Slack ignores and other
receivers read), with an idempotency key per (budget, period, threshold).

The URL is a secret (Slack's carries its token): it is never logged, nor put in an error;
failures are reported by exception type and HTTP status only.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx

from db.budget_alerts import BudgetFigures
from gateway.domain.budgets import describe_scope

log = logging.getLogger(__name__)

_PERIOD_WORD = {"day": "daily", "week": "weekly", "month": "monthly"}


def _money(amount: Decimal) -> str:
    return format(amount.quantize(Decimal("0.0001")).normalize(), "f")


def idempotency_key(figures: BudgetFigures, threshold: int) -> str:
    return f"budget-{figures.budget.id}-{figures.period_start.isoformat()}-{threshold}"


def alert_body(figures: BudgetFigures, threshold: int) -> dict[str, Any]:
    b = figures.budget
    pct = figures.spent_pct
    pct_text = "" if pct is None else f" ({pct.quantize(Decimal('0.1'))}%)"
    text = (
        f"costgate: {describe_scope(b.scope, b.scope_value)} has spent "
        f"${_money(figures.spent_usd)} of its {_PERIOD_WORD[b.period.value]} "
        f"{'hard' if b.hard else 'soft'} budget of ${_money(b.limit_usd)}{pct_text}, "
        f"past the {threshold}% alert. The period ends "
        f"{figures.period_end.strftime('%Y-%m-%d %H:%M')} UTC."
    )
    return {
        "text": text,
        "costgate": {
            "kind": "budget_threshold",
            "idempotency_key": idempotency_key(figures, threshold),
            "budget_id": b.id,
            "scope": b.scope.value,
            "scope_value": b.scope_value,
            "period": b.period.value,
            "period_start": figures.period_start.isoformat(),
            "period_end": figures.period_end.isoformat(),
            "threshold_pct": threshold,
            "limit_usd": format(b.limit_usd.normalize(), "f"),
            "spent_usd": format(figures.spent_usd.normalize(), "f"),
            "reserved_usd": format(figures.reserved_usd.normalize(), "f"),
            "hard": b.hard,
        },
    }


class _HideWebhookUrls(logging.Filter):
    """httpx logs every request's URL at INFO ("HTTP Request: POST <url> ..."); a Slack
    webhook's URL holds its token, so in httpx's records it becomes "<webhook url>".

    httpx logs the URL as it normalised it (the host lower-cased, a default port
    dropped), not as configured: an argument is hidden when it holds the configured URL,
    its normalised form, or the path and query that carry the token."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def add(self, url: str) -> None:
        self.secrets.add(url)
        try:
            parsed = httpx.URL(url)
        except Exception:  # noqa: BLE001 - httpx will refuse it too, before logging it
            return
        self.secrets.add(str(parsed))
        tail = parsed.raw_path.decode("ascii", errors="replace")
        if len(tail) > 1:  # "/" alone is no secret and is in every URL
            self.secrets.add(tail)

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and self.secrets:
            record.args = tuple("<webhook url>" if self._holds_secret(a) else a
                                for a in record.args)  # fmt: skip
        return True

    def _holds_secret(self, arg: object) -> bool:
        text = str(arg)
        return any(secret in text for secret in self.secrets)


_HIDE = _HideWebhookUrls()
logging.getLogger("httpx").addFilter(_HIDE)


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    ok: bool
    attempts: int
    last_error: str | None  # "ConnectError", "HTTP 503": never the URL


class WebhookSender:
    """POSTs a body, retrying failures (connection errors, timeouts, 429 and 5xx) with
    exponential backoff; a 4xx other than 429 is not retried (the body will not change).

    Synchronous: the notifier sends while it holds the alert's row lock, in a thread.
    """

    def __init__(
        self,
        url: str,
        *,
        attempts: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not url.lower().startswith(("http://", "https://")):
            raise ValueError("the alert webhook URL must be http(s)")  # never echo the URL
        self._url = url
        _HIDE.add(url)
        self._attempts = max(1, attempts)
        self._backoff_s = backoff_s
        self._sleep = sleep
        self._client = httpx.Client(timeout=timeout_s, transport=transport)

    def __repr__(self) -> str:  # the URL is a secret
        return "WebhookSender(url=<secret>)"

    def close(self) -> None:
        self._client.close()

    def send(self, body: dict[str, Any]) -> Delivery:
        error: str | None = None
        for attempt in range(1, self._attempts + 1):
            if attempt > 1:
                self._sleep(self._backoff_s * 2 ** (attempt - 2))
            try:
                resp = self._client.post(self._url, json=body)
            except httpx.HTTPError as err:
                error = type(err).__name__
                continue
            if resp.is_success:
                return Delivery(True, attempt, None)
            error = f"HTTP {resp.status_code}"
            if resp.status_code < 500 and resp.status_code != 429:
                return Delivery(False, attempt, error)
        log.warning("budget webhook failed after %d attempts: %s", self._attempts, error)
        return Delivery(False, self._attempts, error)

"""The gateway's warnings and errors in a replica's Serve log, written as they happen.

Our modules log under `gateway.*` and `costgate.*`, and in a replica neither logger has a
handler of its own. A record then went to Python's last-resort handler, whose stderr
Serve has replaced (throughput-optimized mode, which `costgate up` sets) with a stream
that logs each line at INFO into a 1,000-record memory buffer, written to the replica's
log file only when the buffer fills or Serve itself logs an ERROR. Ledger errors ("usage
journal stopped", "records rejected by the database") so reached the file late, if at
all: a replica that exited took them along (after a chaos run, every replica log was empty).

`install()` hands our records to Serve's logger at their own level, then flushes its
handlers: a warning is on disk before the next line of the replica runs. Only WARNING and
above (the loggers' default level) come here, so the request path pays nothing.
"""

from __future__ import annotations

import logging

SERVE_LOGGER = "ray.serve"
OURS = ("gateway", "costgate")


class ToServe(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        # looked up per record: Serve replaces its handlers when the logging config changes
        serve = logging.getLogger(SERVE_LOGGER)
        serve.handle(record)
        for handler in serve.handlers:
            handler.flush()


def install() -> None:
    """Route our loggers to Serve's (once per process); they no longer propagate to the
    root, whose last resort would print them a second time."""
    for name in OURS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, ToServe) for h in logger.handlers):
            logger.addHandler(ToServe())
        logger.propagate = False

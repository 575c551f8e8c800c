"""What a record writer says about itself: alive or not, why not, and how much it holds.

A value, frozen, so that the readiness route, Serve's health check and the metrics read
one consistent picture without reaching into the writer.

Two degrees of trouble, because they call for different remedies:

- not `alive`: the writer cannot do its job any more (a loop ended, crashed over and
  over, or made no progress for longer than any database call can take). Only a new
  process helps: Serve's `check_health` fails and the replica is replaced; its spool
  files are adopted by the next writer.
- alive but not `ready`: the writer works, but the spool cannot be written, so a
  database outage now would cost rows. The replica should take no new traffic, but
  replacing it would not help (the next one gets the same disk).

A database outage alone is neither: rows go to the spool, which is what it is for.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class WriterHealth:
    alive: bool
    problems: tuple[str, ...]  # empty when alive and the spool is writable
    database_ok: bool  # the last write (or replay) attempt succeeded
    spool_writable: bool
    spool_error_kind: str | None  # the class of the last spool error, e.g. OSError
    restarts: int  # loop restarts after an unexpected error, ever
    buffer_depth: int  # rows in memory
    spool_depth: int  # rows in spool files this writer holds, adopted orphans included
    quarantined: int  # spool lines set aside, never replayed
    spool_write_errors: int  # spool writes that failed (their rows stayed in memory)
    dropped: int  # rows lost

    @property
    def ready(self) -> bool:
        return not self.problems

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why not ready, for anyone who may ask (`/readyz` is open): no paths, no
        figures; `problems` has the details, for the logs and the health check."""
        out = [] if self.alive else ["ledger writer not alive"]
        if not self.spool_writable:
            out.append(f"ledger spool not writable ({self.spool_error_kind})")
        return tuple(out)

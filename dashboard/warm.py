"""`python -m dashboard.warm`: build and store the closed days' rollup, then exit.

`costgate dashboard` starts it beside the server, so that the days are on disk
(`dashboard.rollup.DayStore`) before the first visitor arrives: the server restores them
instead of scanning the ledger while someone waits.
"""

from __future__ import annotations

import datetime as dt
import logging

from dashboard.filters import DEFAULT_DAYS
from dashboard.queries import rollup_for
from dashboard.settings import load_settings


def main() -> int:
    logging.basicConfig(level=logging.WARNING)
    today = dt.datetime.now(dt.UTC).date()
    try:
        rollup_for(load_settings().database_url).days(
            today - dt.timedelta(days=2 * DEFAULT_DAYS), today - dt.timedelta(days=1)
        )
    except Exception as err:  # noqa: BLE001 - the server builds what it needs itself
        logging.warning("rollup not prepared: %s", type(err).__name__)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

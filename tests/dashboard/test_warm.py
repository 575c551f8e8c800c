"""`python -m dashboard.warm` stores the closed days a starting dashboard restores."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pandas as pd

from tests.dashboard.support.ledger import insert_records
from tests.dashboard.support.records import record


def test_warm_stores_yesterday_for_the_server_to_restore(ledger_engine, database_url,
                                                          empty_usage, tmp_path):
    yesterday = dt.datetime.now(dt.UTC).replace(hour=12, minute=0) - dt.timedelta(days=1)
    insert_records(ledger_engine, [record(started_at=yesterday) for _ in range(3)])
    env = dict(os.environ, DATABASE_URL=database_url, COSTGATE_STATE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "dashboard.warm"], env=env, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (stored,) = (tmp_path / "dashboard-rollup").glob(f"*/{yesterday.date().isoformat()}.pkl")
    cube, _ = pd.read_pickle(stored)
    assert cube["requests"].sum() == 3

"""Finance analytics, pure: FOCUS 1.2 rows and their column rules, what-if re-pricing,
invoice parsing and reconciliation, dated FX. The database reads are in `db.analytics`;
the CLI (`gateway/cli/finance.py`) and the dashboard's Reconcile and What-if pages call both.
"""

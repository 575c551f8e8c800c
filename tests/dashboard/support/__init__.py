"""Helpers the dashboard tests share: hand-made records and the test ledger's sums.

A package of their own so that tests/dashboard/ holds test modules, not their tools.
"""

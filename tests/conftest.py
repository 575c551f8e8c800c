"""Shared fixtures live in tests/fixtures/, one module per real part they start."""

pytest_plugins = [
    "tests.fixtures.database",
    "tests.fixtures.sim",
    "tests.fixtures.gateway",
]

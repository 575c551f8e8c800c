"""Shared fixtures live in tests/fixtures/, one module per real part they start."""

pytest_plugins = [
    "tests.fixtures.database",
    "tests.fixtures.sim",
    "tests.fixtures.gateway",
    # the real Ray Serve gateway the routing and control tests share
    "tests.fixtures.live_gateway",
]

"""Shared fixtures live in tests/fixtures/, one module per real part they start."""

pytest_plugins = [
    # first: the run's id and its watchdog, before any fixture starts a process
    "tests.runner.reaper",
    # and no folder its Ray heads kept in /tmp
    "tests.runner.temp_dirs",
    # which tests share a pytest-xdist worker, and in which order they go out
    "tests.runner.scheduling",
    "tests.fixtures.database",
    "tests.fixtures.sim",
    "tests.fixtures.gateway",
    # the real Ray Serve gateway the routing and control tests share
    "tests.fixtures.live_gateway",
]

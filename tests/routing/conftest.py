"""Fixtures of the routing tests: the real gateway lives in tests/routing/live_gateway.py."""

from tests.routing.live_gateway import routing_gateway  # noqa: F401 - a fixture

"""The request-path harness of `tests/gateway/replica/test_service.py`, shared here."""

from tests.gateway.replica.test_service import harness_for, provider_keys  # noqa: F401

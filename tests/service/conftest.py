"""Fixtures for the service suite (shared ones, such as `postgres_server_session`, are in tests/conftest.py).

No `__init__.py` here on purpose (like the other test folders): test modules are named
`test_service_*` so their basenames stay unique. Helpers (`service_helpers`, the loopback Ray
cluster) are in tests/support/.
"""

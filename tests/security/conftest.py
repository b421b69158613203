"""Fixtures of the security tests: the web tests' live server around the tiny model."""

from tests.web.conftest import controller, live  # noqa: F401  (fixtures used here too)

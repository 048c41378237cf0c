"""Shared fixtures. Integration fixtures live in tests/integration/conftest.py."""

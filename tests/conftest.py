"""Shared pytest configuration. Spark fixtures live in tests/spark/conftest.py."""

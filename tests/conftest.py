"""Shared pytest configuration: the TCK runs live in tests/tck, adapters in tests/adapters."""

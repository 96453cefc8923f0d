"""Scenarios as data, for tests that vary one small base scenario."""

from __future__ import annotations


def merge(base: dict, change: dict) -> dict:
    """``base`` with ``change`` laid over it, tables merged key by key."""
    merged = dict(base)
    for key, value in change.items():
        nested = isinstance(value, dict) and isinstance(base.get(key), dict)
        merged[key] = merge(base[key], value) if nested else value
    return merged

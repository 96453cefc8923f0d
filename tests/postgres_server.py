"""The tests' throwaway PostgreSQL (the lab's own, ``simulator.backends.
local_postgres``), and the rule for tests that need one: they skip loudly,
naming the missing binaries, when it cannot be started, and fail instead when
``REQUIRE_POSTGRES=1`` (CI sets it).

One cluster serves the whole session (``tests/conftest.py``'s
``postgres_server`` fixture); each test works in fresh schemas of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from simulator.backends.local_postgres import (
    MISSING_BINARIES,
    ThrowawayPostgres,
    postgres_binaries,
)

__all__ = ["SKIP_REASON", "ThrowawayPostgres", "postgres_required", "serve_postgres"]

SKIP_REASON = f"{MISSING_BINARIES}: PostgreSQL tests skipped (install postgresql)"
"""Also how ``conftest`` recognises these skips for its loud summary."""


def postgres_required() -> bool:
    return os.environ.get("REQUIRE_POSTGRES") == "1"


def serve_postgres() -> Iterator[ThrowawayPostgres]:
    """The body of a session fixture: a started cluster, stopped afterwards;
    a loud skip without the binaries, a failure when they are required."""
    binaries = postgres_binaries()
    if binaries is None:
        if postgres_required():
            pytest.fail(f"REQUIRE_POSTGRES=1 but {SKIP_REASON}")
        pytest.skip(SKIP_REASON)
    server = ThrowawayPostgres(binaries)
    try:
        yield server
    finally:
        server.stop()

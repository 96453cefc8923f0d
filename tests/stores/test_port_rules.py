"""Stores await only their ports: no asyncio, wall clock, uuid or simulator."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

STORES = Path(__file__).resolve().parents[2] / "stores"
FORBIDDEN = {"asyncio", "time", "uuid", "random", "secrets", "simulator", "threading"}
# The production runtime is the one place allowed to touch them: it is the port.
EXEMPT = {"asyncio_runtime.py"}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize(
    "module",
    [p for p in sorted(STORES.rglob("*.py")) if p.name not in EXEMPT],
    ids=lambda p: str(p.relative_to(STORES)),
)
def test_a_store_module_imports_nothing_but_its_ports(module):
    assert imported_roots(module) & FORBIDDEN == set()


def test_every_lua_script_a_store_runs_lives_in_a_lua_file():
    sources = "\n".join(p.read_text() for p in STORES.rglob("*.py"))
    assert "redis.call(" not in sources
    assert list(STORES.rglob("*.lua"))

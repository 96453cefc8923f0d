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


def without_patches(source: str) -> str:
    """``source`` with every ``Patch(...)`` call taken out."""
    tree = ast.parse(source)
    patches = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
               and isinstance(node.func, ast.Name) and node.func.id == "Patch"]
    for node in patches:
        source = source.replace(ast.get_source_segment(source, node), "Patch()")
    return source


def test_every_lua_script_a_store_runs_lives_in_a_lua_file():
    # Seams excepted: a variant states the few lines it changes in a shipped
    # script as a Patch beside its Python (stores.scripts), never a script.
    sources = "\n".join(without_patches(p.read_text()) for p in STORES.rglob("*.py"))
    assert "redis.call(" not in sources
    assert list(STORES.rglob("*.lua"))


def test_the_rule_above_sees_lua_outside_a_patch():
    assert "redis.call(" not in without_patches('Patch("redis.call(\'GET\', KEYS[1])", "")')
    assert "redis.call(" in without_patches('Patch("x", "y")\nLUA = "redis.call(\'GET\')"')

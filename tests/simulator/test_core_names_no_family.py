"""The core names no family: a family plugs in (``simulator.families``).

Every module of ``simulator/`` outside ``FAMILY_SPECIFIC`` holds a ``Family``
and an ``Oracle`` and never imports a family's package or spells a family's
names; a new family, or a plugin's, then needs no edit to them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from simulator.families import SHIPPED
from stores.registry import FAMILIES as STORE_FAMILIES

SIMULATOR = Path(__file__).resolve().parents[2] / "simulator"
FAMILY_SPECIFIC = ("families", "analysis", "bench", "compiled")
"""Where families may be named: their own packages; the notebooks' analyses,
each answering a question about one family's store; the benchmarks, which
measure each family's scripts against its ceiling; the compiled build, which
lists the modules it compiles by name."""
CORE_MODULES = sorted(path for path in SIMULATOR.rglob("*.py")
                      if path.relative_to(SIMULATOR).parts[0] not in FAMILY_SPECIFIC)

FAMILY_MODULES = (
    *(f"stores.{family}" for family in STORE_FAMILIES),
    *(f"simulator.families.{family}" for family in SHIPPED),
)
"""Packages that belong to one family (its oracle, causes and leaks live in
its own package; the core's ``simulator.plugin`` holds only the contract, the
protocols and the arithmetic of attribution)."""

FAMILY_NAMES = (
    *STORE_FAMILIES, *SHIPPED,
    "BudgetOracle", "ScopeOracle", "BudgetKey", "RecordedLedger", "LedgerObserver",
    "subject_cap_microdollars", "namespace_cap_microdollars", "read_ledgers",
)
"""Words that name a family or one of its types or settings."""


def family_imports(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found += [module for module in modules
                  if any(module == banned or module.startswith(f"{banned}.")
                         for banned in FAMILY_MODULES)]
    return found


def family_words(tree: ast.AST) -> list[str]:
    """Strings (docstrings included) and identifiers that contain a family's name."""
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words.append(node.value)
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append(node.name)
        elif isinstance(node, ast.arg):
            words.append(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            words.append(node.arg)
        elif isinstance(node, ast.alias):
            words += [node.name, node.asname or ""]
    return sorted({name for word in words for name in FAMILY_NAMES if name in word})


def parsed(module: Path) -> ast.AST:
    return ast.parse(module.read_text(), filename=str(module))


@pytest.mark.parametrize("module", CORE_MODULES, ids=lambda p: str(p.relative_to(SIMULATOR)))
def test_a_core_module_imports_no_family_package(module):
    assert family_imports(parsed(module)) == []


@pytest.mark.parametrize("module", CORE_MODULES, ids=lambda p: str(p.relative_to(SIMULATOR)))
def test_a_core_module_spells_no_family_name(module):
    assert family_words(parsed(module)) == []


def test_the_checks_see_a_family_where_there_is_one():
    # The rules themselves: a module written the old, budget-shaped way fails both.
    tree = ast.parse(
        "from simulator.families.axond_budget.oracle import BudgetOracle\n"
        "import stores.axond_budget\n"
        "cap = getattr(settings, 'subject_cap_microdollars', None)\n")
    assert family_imports(tree) == ["simulator.families.axond_budget.oracle",
                                    "simulator.families.axond_budget.oracle.BudgetOracle",
                                    "stores.axond_budget"]
    assert family_words(tree) == ["BudgetOracle", "axond_budget", "subject_cap_microdollars"]

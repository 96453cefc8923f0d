"""The house in one direction: each package of ``simulator/`` is one layer and
imports only the layers below it, and no two modules import each other.

Every import counts: at module level, inside a function (a lazy import is
still a dependency) and under ``TYPE_CHECKING`` (a type names what a module
is written against). The layers, lowest first, are ``LAYERS``; see
``docs/design-notes.md`` ("Layers") for why each sits where it does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIMULATOR = ROOT / "simulator"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("compiled",),            # loads the compiled hot path; imports nothing of the lab
    ("engine",),              # kernel, traps, streams, trace, runtime
    ("backends",),            # fakeredis, real Redis, PostgreSQL, throwaway servers
    ("reach",),               # which store lines a run executed (a replay on fakeredis, marks)
    ("scenario",),            # what a scenario may say
    ("net",),                 # links, connections, server and service nodes, the ports
    ("plugin",),              # the contract a family implements
    ("world",),               # fleet, faults applied, operations, requests
    ("families",),            # one package per family
    ("run",),                 # compose one run
    ("sweeps",),              # designs, execution, results
    ("search",),              # hunt, races, counterfactual
    ("present",),             # report, verdicts, timelines, HTML report
    ("analysis", "bench", "mutate"),  # what notebooks compute; benchmarks; mutants
    ("cli", "strategies"),    # the commands; an old name kept as a re-export
    ("__main__",),            # python -m simulator
)
"""Layers, lowest first. A module may import its own package and any lower
layer; packages on one line are peers and never import each other."""

RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(SIMULATOR.rglob("*.py"))}


MODULES = all_modules()


def imports_of(name: str, source: str, is_package: bool = False) -> set[str]:
    """The lab's modules ``name`` imports, anywhere in its ``source``, resolved to modules."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # ``from simulator.run import limits`` imports the module ``limits``.
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES
                       else module for alias in node.names]
        else:
            continue
        found |= {target for target in targets
                  if target in MODULES and target != name}
    return found


GRAPH = {name: imports_of(name, path.read_text(), path.name == "__init__.py")
         for name, path in MODULES.items()}


def layer_of(module: str) -> str | None:
    """The package (layer) a module belongs to; None for ``simulator`` itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_package_has_a_layer():
    unplaced = sorted({layer for module in MODULES if (layer := layer_of(module))} - set(RANK))
    assert unplaced == [], f"packages with no layer in LAYERS: {unplaced}"


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in graph.items():
        here = layer_of(module)
        for target in sorted(targets):
            there = layer_of(target)
            if here is None or there is None or here == there:
                continue
            if RANK[there] >= RANK[here]:
                found.append(f"{module} imports {target} ({there} is not below {here})")
    return found


def test_a_layer_imports_only_the_layers_below_it():
    assert wrong_way(GRAPH) == []


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        # Iterative, so a deep import chain cannot overflow the interpreter's stack.
        work = [(node, iter(sorted(graph.get(node, ()))))]
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        while work:
            current, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[current] = min(low[current], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[current])
                if low[current] == index[current]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == current:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other():
    assert cycles(GRAPH) == []


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_cycle_finder_finds_cycles(graph, expected):
    assert cycles(graph) == expected


def test_the_direction_check_sees_an_upward_import():
    graph = {"simulator.engine.kernel": {"simulator.run.compose"},
             "simulator.run.compose": {"simulator.engine.kernel"},
             "simulator.net.links": {"simulator.scenario.model"},
             "simulator.scenario.model": {"simulator.net.links"}}
    assert wrong_way(graph) == [
        "simulator.engine.kernel imports simulator.run.compose (run is not below engine)",
        "simulator.scenario.model imports simulator.net.links (net is not below scenario)"]


def test_imports_are_read_everywhere_in_a_module():
    # A lazy import, a type-only import and a relative one are dependencies too.
    source = ("from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from simulator.world.fleet import Replica\n"
              "def f():\n    from simulator.run import limits\n"
              "from .traps import Sleep\n")
    assert imports_of("simulator.engine.kernel", source) == {
        "simulator.world.fleet", "simulator.run.limits", "simulator.engine.traps"}

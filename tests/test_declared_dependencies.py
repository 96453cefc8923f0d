"""Every package the lab imports at run time is a declared dependency: a
plain ``pip install .`` of a fresh clone runs every command.

The imports are read from the sources (anywhere in a module: a command's
modules are imported lazily), mapped to the distributions that provide
them, and compared with ``[project] dependencies`` (the ``test`` and
``notebooks`` extras do not count: the commands must not need them).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB = {"simulator", "stores"}
OPTIONAL = {"IPython": "imported only inside a Jupyter kernel, which brings it"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """The distributions ``[project] dependencies`` installs, with those their
    extras bring (``dask[distributed]`` brings ``distributed``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = set()
    for spec in project["dependencies"]:
        match = re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", spec)
        name, extras = match[1], {extra.strip() for extra in (match[2] or "").split(",")}
        names.add(normalized(name))
        for requirement in importlib.metadata.requires(name) or []:
            extra = re.search(r"extra\s*==\s*[\"']([^\"']+)", requirement)
            if extra and extra[1] in extras:
                names.add(normalized(re.split(r"[<>=!~\[ ;(]", requirement, maxsplit=1)[0]))
    return names


def imported_roots() -> dict[str, set[str]]:
    """Top-level modules outside the standard library, by the files importing them."""
    found: dict[str, set[str]] = {}
    for package in LAB:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    root = name.split(".")[0]
                    if root not in sys.stdlib_module_names and root not in LAB:
                        found.setdefault(root, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_a_declared_dependency():
    providers = importlib.metadata.packages_distributions()
    wanted = declared()
    missing = {}
    for root, files in imported_roots().items():
        if root in OPTIONAL:
            continue
        distributions = {normalized(name) for name in providers.get(root, [root])}
        # fakeredis[lua] declares fakeredis; redis-py is "redis".
        if not distributions & wanted:
            missing[root] = sorted(files)[:3]
    assert missing == {}, f"imported but not declared in [project] dependencies: {missing}"


def test_the_check_sees_the_imports_it_must():
    roots = imported_roots()
    assert {"pydantic", "redis", "hypothesis", "pyarrow"} <= set(roots)

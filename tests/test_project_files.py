"""The project's own files agree with each other and with the code."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# conda-forge spells a few packages differently.
CONDA_NAMES = {"redis": "redis-py"}


def requirement_bounds(requirements: list[str]) -> dict[str, str]:
    bounds = {}
    for requirement in requirements:
        match = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*(>=\s*[0-9.]+)", requirement)
        assert match, f"{requirement!r} has no lower bound"
        name = match.group(1).lower()
        bounds[CONDA_NAMES.get(name, name)] = match.group(2).replace(" ", "")
    return bounds


def test_environment_yml_mirrors_the_dependencies_of_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = requirement_bounds(project["dependencies"]
                                + project["optional-dependencies"]["test"])
    listed = {}
    for line in (REPO / "environment.yml").read_text().splitlines():
        match = re.match(r"^\s*-\s*([A-Za-z0-9_.-]+)(>=[0-9.]+)\s*$", line)
        if match:
            listed[match.group(1).lower()] = match.group(2)
    missing = {name: bound for name, bound in wanted.items() if listed.get(name) != bound}
    assert missing == {}, f"environment.yml lacks or disagrees on: {missing}"
    assert "redis-server" in listed


def test_the_readme_gives_the_two_commands_the_makefile_runs():
    readme = (REPO / "README.md").read_text()
    makefile = (REPO / "Makefile").read_text()
    for command in ("make demo", "make test"):
        assert f"\n{command}\n" in readme
        assert f"\n{command.split()[1]}: " in makefile


def test_ci_runs_the_readmes_test_command_with_real_redis_and_postgresql_required():
    ci = (REPO / ".ci" / "run").read_text()
    assert "REQUIRE_REDIS=1" in ci and "REQUIRE_POSTGRES=1" in ci
    assert "make test" in ci
    assert "redis-server" in ci and "postgresql" in ci


def test_every_notebook_is_a_text_notebook_executed_by_a_test_of_its_own():
    notebooks = sorted((REPO / "notebooks").glob("*.py"))
    assert len(notebooks) >= 5
    for notebook in notebooks:
        text = notebook.read_text()
        assert "format_name: percent" in text, f"{notebook.name} is not a percent notebook"
        assert text.count('tags=["parameters"]') == 1, f"{notebook.name}: one parameters cell"
        test = REPO / "tests" / "notebooks" / f"test_{notebook.stem}.py"
        assert test.exists(), f"{notebook.name} has no test ({test.relative_to(REPO)})"
        assert f'"{notebook.stem}"' in test.read_text(), f"{test.name} does not run it"
    assert not list((REPO / "notebooks").glob("*.ipynb")), "outputs belong nowhere in git"

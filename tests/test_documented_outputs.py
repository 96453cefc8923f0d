"""What the documented commands write lands under ``data/results/`` (or a path
the user gives) and git ignores it: a newcomer who follows the docs is left
with a clean ``git status``.

Each test works in a scratch git repository holding the project's
``.gitignore`` and links to its inputs, so what a command writes shows up in
that repository's ``git status`` and nowhere else.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from simulator.cli import main

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "notebooks" / "README.md", REPO / "data" / "races" / "README.md",
        *sorted((REPO / "docs").glob("*.md"))]
INPUTS = ["data/scenarios", "data/sweeps", "data/races", "data/workloads", "notebooks"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A git repository with the project's .gitignore and its inputs linked in,
    committed, so its status starts clean."""
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    shutil.copy(REPO / ".gitignore", tmp_path / ".gitignore")
    for name in INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).symlink_to(REPO / name)
    git("add", "-A")
    git("-c", "user.name=lab", "-c", "user.email=lab@localhost", "commit", "-q", "-m", "inputs")
    assert untracked(tmp_path) == []
    return tmp_path


def untracked(repo: Path) -> list[str]:
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=repo, check=True, capture_output=True, text=True).stdout
    return status.splitlines()


def documented_commands() -> list[str]:
    """Every command line the docs show in code blocks (continuations joined)."""
    commands = []
    for doc in DOCS:
        for block in re.findall(r"```[^\n]*\n(.*?)```", doc.read_text(), flags=re.S):
            commands += [line for line in block.replace("\\\n", " ").splitlines()
                         if "python" in line or "jupyter" in line]
    return commands


def is_users_choice(path: str) -> bool:
    """``DIR``, ``FILE.png`` or a path outside the checkout: the user's own."""
    return path.startswith("/") or ("/" not in path and path.split(".")[0].isupper())


def documented_outputs() -> list[str]:
    """The paths the documented commands are shown writing: ``--out`` and
    ``--plot`` arguments (a hunt's report brings its trace beside it) and the
    notebooks written by papermill; the user's own choices left out."""
    outputs = []
    for command in documented_commands():
        for option, path in re.findall(r"(--out|--plot)[ =]([^\s\]]+)", command):
            if is_users_choice(path):
                continue
            outputs.append(path)
            if " hunt " in command and option == "--out":
                outputs.append(str(Path(path).with_suffix(".trace.parquet")))
    for doc in DOCS:
        outputs += re.findall(r"'([^'\s]+\.ipynb)'", doc.read_text())
    return outputs


def test_the_docs_show_commands_writing_files():
    outputs = documented_outputs()
    # The hunt example, its trace, the race plot and the notebook run at least.
    assert len(outputs) >= 4, outputs
    assert any(path.endswith(".trace.parquet") for path in outputs)
    assert any(path.endswith(".ipynb") for path in outputs)


@pytest.mark.parametrize("path", documented_outputs())
def test_every_path_the_docs_show_a_command_writing_is_under_data_results_and_ignored(
        path, scratch):
    assert path.startswith("data/results/"), f"{path}: the docs write outside data/results/"
    target = scratch / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"")
    assert untracked(scratch) == []


def test_the_cheap_documented_commands_leave_git_status_clean(scratch, monkeypatch,
                                                               capsys):
    # The docs' commands, made small: where they write does not depend on how
    # long or how wide they simulate. (A run with --counterfactual writes what
    # a plain run does, and more.)
    small = ["--set", "duration=1s", "--set", "fleet.replicas=30"]
    commands = [
        ["run", "data/scenarios/demo.toml", "--quiet", "--counterfactual", *small],
        ["sweep", "data/sweeps/smoke.toml", "--quiet", "--workers", "1", *small],
        ["replay", "data/races/split-settlement-lost-release-reply.toml", "--against", "fixed"],
        ["replay", "data/races/split-settlement-lost-release-reply.toml", "--plot",
         "data/results/race.png"],
    ]
    monkeypatch.chdir(scratch)
    for command in commands:
        assert main(command) == 0, f"{command}: {capsys.readouterr().err}"
    assert (scratch / "data/results/demo-seed1/counterfactual.json").exists()
    assert (scratch / "data/results/sweeps/smoke/results.parquet").exists()
    assert (scratch / "data/results/race.png").exists()
    assert untracked(scratch) == []

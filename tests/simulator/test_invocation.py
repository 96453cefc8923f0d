"""Commands the lab prints can be pasted back as printed (issue 30): they name
the Python that runs the lab, not a bare ``python`` that may lack it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from simulator.cli import build_parser
from simulator.present.invocation import lab_command, python_here

REPO = Path(__file__).resolve().parents[2]


def test_a_printed_command_runs_where_the_lab_was_run_even_without_python_on_the_path(
        monkeypatch):
    monkeypatch.chdir(REPO)
    words = shlex.split(lab_command("stores"))
    assert words[0] != "python" and Path(words[0]).resolve() == Path(sys.executable).resolve()
    bare = {key: value for key, value in os.environ.items() if key != "PATH"}
    bare["PATH"] = "/nonexistent"
    done = subprocess.run(words, cwd=REPO, env=bare, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "axond_budget.redis_v1" in done.stdout


def test_the_interpreter_is_named_from_the_working_directory_when_below_it(monkeypatch, tmp_path):
    monkeypatch.chdir(Path(sys.executable).parent)
    assert python_here() == f".{os.sep}{Path(sys.executable).name}"
    monkeypatch.chdir(tmp_path)
    assert python_here() == sys.executable or Path(python_here()).is_absolute()


def test_usage_lines_name_the_same_command(monkeypatch):
    monkeypatch.chdir(REPO)
    assert build_parser().format_usage().startswith(f"usage: {lab_command()}")

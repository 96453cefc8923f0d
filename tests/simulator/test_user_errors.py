"""A file a command cannot read is one line naming it, and exit 2.

A newcomer gives a directory, a missing file or a file that is not text to
``run``, ``sweep``, ``replay`` or ``hunt``; each must say which path and what
was wanted, without a traceback. The files are read in one place
(``simulator.scenario.model.read_toml``), so every command is checked here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.cli import USER_ERROR, main
from simulator.scenario.model import ScenarioError, read_toml
from simulator.search.races import load_report
from simulator.sweeps import load_sweep

REPO = Path(__file__).resolve().parents[2]

# Each command with the arguments it needs besides the file it reads.
COMMANDS = {
    "run": ["run", "{path}", "--quiet"],
    "sweep": ["sweep", "{path}", "--quiet"],
    "replay": ["replay", "{path}"],
    "hunt": ["hunt", "{path}", "--invariant", "conservation_drift_microdollars_total < 0"],
}


def run_cli(command: str, path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    argv = [part.format(path=path) for part in COMMANDS[command]]
    code = main(argv)
    return code, capsys.readouterr().err


def assert_one_line_naming(error: str, path: Path, words: str) -> None:
    lines = error.strip().splitlines()
    assert len(lines) == 1, error
    assert str(path) in lines[0] and words in lines[0], error
    assert "Traceback" not in error


@pytest.mark.parametrize("command", COMMANDS)
def test_a_directory_given_as_the_file_is_one_line_naming_it_and_exit_2(command, tmp_path,
                                                                        capsys):
    (tmp_path / "inside.toml").write_text('name = "x"\n')
    code, error = run_cli(command, tmp_path, capsys)
    assert code == USER_ERROR
    assert_one_line_naming(error, tmp_path, "is a directory")
    assert str(tmp_path / "inside.toml") in error, "names a file in it that would do"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_that_is_not_utf8_is_one_line_naming_it_and_exit_2(command, tmp_path, capsys):
    binary = tmp_path / "latin1.toml"
    binary.write_bytes('name = "café"\n'.encode("latin-1"))
    code, error = run_cli(command, binary, capsys)
    assert code == USER_ERROR
    assert_one_line_naming(error, binary, "not UTF-8")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_file_is_one_line_naming_it_and_exit_2(command, tmp_path, capsys):
    absent = tmp_path / "absent.toml"
    code, error = run_cli(command, absent, capsys)
    assert code == USER_ERROR
    assert_one_line_naming(error, absent, "no such")


def test_a_path_the_system_cannot_open_names_it_and_why(tmp_path):
    # A file used as a directory: neither missing nor a directory, the system's
    # reason is the message (a file without read permission goes the same way).
    beneath_a_file = tmp_path / "demo.toml" / "x.toml"
    beneath_a_file.parent.write_text('name = "x"\n')
    with pytest.raises(ScenarioError, match="x.toml: cannot read the scenario file: "
                                            "Not a directory"):
        read_toml(beneath_a_file)


def test_a_sweep_whose_base_scenario_is_a_directory_names_the_sweeps_field(tmp_path):
    (tmp_path / "scenarios").mkdir()
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('name = "s"\nscenario = "scenarios"\n[vary]\n"fleet.replicas" = [1, 2]\n')
    with pytest.raises(ScenarioError, match="is a directory; give a base scenario") as raised:
        load_sweep(sweep)
    assert "'scenario' field" in str(raised.value)


def test_a_race_report_whose_scenario_is_missing_names_the_report(tmp_path):
    report = tmp_path / "race.toml"
    report.write_text('title = "t"\nscenario = "gone.toml"\nvariant = {}\nseed = 1\n'
                      'invariant = { broken_when = "x > 0" }\n')
    with pytest.raises(ScenarioError, match="no such scenario file") as raised:
        load_report(report)
    assert f"named by the race report {report}" in str(raised.value)


def test_a_sweep_told_to_write_its_results_into_a_file_says_so(tmp_path, capsys):
    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n")
    code = main(["sweep", str(REPO / "data/sweeps/smoke.toml"), "--out", str(taken), "--quiet"])
    assert code == USER_ERROR
    # The sweep's own heading line comes first; the error is the last line.
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert_one_line_naming(error, taken, "is a file; give a directory")
    assert taken.read_text() == "mine\n"


@pytest.mark.parametrize(("argv", "words"), [
    (["run", "data/scenarios/tollgate.toml", "--quiet", "--out", "README.md"], "is a file"),
    (["hunt", "data/scenarios/hunt/tollgate-replay-bills-twice-quiet.toml",
      "--invariant", "double_billed_units > 0", "--out", "data"], "is a directory"),
])
def test_an_output_path_of_the_wrong_kind_is_refused_before_anything_runs(argv, words, capsys):
    code = main(argv)
    error = capsys.readouterr().err
    assert code == USER_ERROR
    assert error.count("\n") == 1 and words in error, error


def test_an_output_nobody_can_write_is_one_line(tmp_path, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("")
    code = main(["run", "data/scenarios/hunt/tollgate-replay-bills-twice-quiet.toml", "--quiet",
                 "--out", str(blocked / "below")])
    error = capsys.readouterr().err
    assert code == USER_ERROR and error.count("\n") == 1 and str(blocked) in error, error

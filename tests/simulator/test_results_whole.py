"""A run's results are written whole or not at all (issue 25): staged beside
``--out`` and moved in together, an older run's files never kept or listed as
this one's, a failed write naming the file and leaving the previous results
intact, an unwritable or full ``--out`` refused before the simulation."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest

from simulator.cli import USER_ERROR, main
from simulator.run import results

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "data" / "scenarios" / "demo.toml"
SMALL = ["--set", "duration=1s", "--set", "drain=1s", "--set", "fleet.replicas=5", "--quiet"]


def run(out: Path, *more: str) -> int:
    return main(["run", str(DEMO), "--out", str(out), *SMALL, *more])


def test_an_older_run_s_files_are_neither_kept_nor_listed(tmp_path, capsys):
    out = tmp_path / "out"
    assert run(out) == 0
    assert (out / "metrics.parquet").exists()
    (out / "notes.txt").write_text("the user's own")
    capsys.readouterr()
    assert run(out, "--set", "metrics.sample_every=0s") == 0
    printed = capsys.readouterr().out
    assert not (out / "metrics.parquet").exists()
    assert "metrics.parquet" not in printed
    assert (out / "notes.txt").read_text() == "the user's own"  # not the lab's: untouched
    assert not list(tmp_path.glob(".out.writing-*"))  # no staging left behind


def test_a_failed_write_names_the_file_and_leaves_the_previous_results(tmp_path, capsys,
                                                                       monkeypatch):
    out = tmp_path / "out"
    assert run(out) == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()}

    def disk_full(self, path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("simulator.engine.trace.Trace.write_parquet", disk_full)
    capsys.readouterr()
    assert run(out, "--seed", "2") == USER_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: could not write {out / 'trace.parquet'}: No space left on "
                       f"device; the previous results in {out} are as they were")
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert json.loads((out / "summary.json").read_text())["seed"] == 1


def test_an_unwritable_or_full_out_is_refused_before_the_simulation(tmp_path, capsys,
                                                                    monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    ran = []
    monkeypatch.setattr("simulator.run.compose.run_scenario", lambda *a, **k: ran.append(1))
    assert run(blocker / "out") == USER_ERROR
    assert "--out: cannot write in" in capsys.readouterr().err
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(results.shutil, "disk_usage",
                        lambda path: usage._replace(free=2**20))
    assert run(tmp_path / "full") == USER_ERROR
    assert "1.0 MiB free; the results need about" in capsys.readouterr().err
    assert ran == []


def test_results_are_moved_in_together(tmp_path):
    out = tmp_path / "out"
    written = results.write_results(out, {"summary.json": results.json_writer({"a": 1}),
                                          "run_info.json": results.json_writer({})})
    assert [path.name for path in written] == ["summary.json", "run_info.json"]
    with pytest.raises(results.ResultsNotWritten, match="could not write .*run_info.json"):
        results.write_results(out, {"summary.json": results.json_writer({"a": 2}),
                                    "run_info.json": lambda path: (_ for _ in ()).throw(
                                        OSError(errno.EIO, "I/O error"))})
    assert json.loads((out / "summary.json").read_text()) == {"a": 1}

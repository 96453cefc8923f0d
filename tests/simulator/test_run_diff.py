"""``python -m simulator diff RUN_A RUN_B``: the metrics that differ between
two runs, grouped as the summary is, with B − A; a path that is not a run is
one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.present.diff import ABSENT, Difference, diff_table, differences, read_summary

BASE = {"scenario": "demo", "store": "axond_budget.redis_v2", "backend": "fakeredis", "seed": 1,
        "requests_arrived": 100, "cap_overshoot_microdollars_total": 0,
        "cap_overshoot_by_store_logic_microdollars": 0, "leaked_hold_peak_share_of_cap": 0.1,
        "namespace_denials_caused_by_leaked_holds": 11_313, "trace_fingerprint": "aaaa"}


def _write(directory: Path, summary: dict) -> Path:
    directory.mkdir(parents=True)
    (directory / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return directory


def test_only_the_metrics_that_differ_are_listed_in_the_summarys_groups():
    other = {**BASE, "cap_overshoot_microdollars_total": 12_305,
             "cap_overshoot_by_store_logic_microdollars": 12_000,
             "leaked_hold_peak_share_of_cap": 0.3, "namespace_denials_caused_by_leaked_holds": 0,
             "trace_fingerprint": "bbbb"}
    found = dict(differences(BASE, other))
    assert found == {
        "cap": [Difference("cap_overshoot_microdollars_total", 0, 12_305),
                # A per-cause metric that was zero in A is shown: it moved.
                Difference("cap_overshoot_by_store_logic_microdollars", 0, 12_000)],
        "holds": [Difference("leaked_hold_peak_share_of_cap", 0.1, 0.3)],
        "denials, namespace scope": [
            Difference("namespace_denials_caused_by_leaked_holds", 11_313, 0)],
        "determinism": [Difference("trace_fingerprint", "aaaa", "bbbb")]}
    assert found["holds"][0].change == "+0.2"  # rounded, not 0.19999999999999998
    assert found["cap"][0].change == "+12,305"
    assert found["determinism"][0].change == ""  # words have no difference


def test_a_metric_only_one_run_has_is_absent_in_the_other():
    v1 = {name: value for name, value in BASE.items() if not name.startswith("namespace_")}
    (difference,) = [difference for _, changed in differences(v1, BASE)
                     for difference in changed]
    assert difference == Difference("namespace_denials_caused_by_leaked_holds", ABSENT, 11_313)
    assert "absent" in diff_table("a", "b", v1, BASE)


def test_the_table_names_the_runs_and_counts_what_differs():
    other = {**BASE, "requests_arrived": 90}
    table = diff_table("runs/a", "runs/b", BASE, other).splitlines()
    assert table[0] == "A: runs/a (demo, axond_budget.redis_v2, fakeredis, seed 1)"
    row = next(line for line in table if "requests_arrived" in line)
    assert row.split() == ["requests_arrived", "100", "90", "-10"]
    assert table[-1] == f"1 of {len(BASE)} metrics differ"
    assert diff_table("a", "b", BASE, BASE).splitlines()[-1] == (
        f"the two runs agree on all {len(BASE)} metrics")


def test_the_cli_takes_a_results_directory_or_its_summary_json(tmp_path, capsys):
    a = _write(tmp_path / "a", BASE)
    b = _write(tmp_path / "b", {**BASE, "requests_arrived": 90})
    assert main(["diff", str(a), str(b / "summary.json")]) == 0
    out = capsys.readouterr().out
    assert "-- requests" in out and "requests_arrived" in out and "-10" in out


@pytest.mark.parametrize(("make", "message"), [
    (lambda root: root / "missing", "missing: no such file or directory"),
    (lambda root: root, "a directory without summary.json; give a run's results directory"),
    (lambda root: _text(root / "x.json", "{not json"), "x.json: not a run's summary.json ("),
    (lambda root: _text(root / "y.json", "[1, 2]"), "y.json: not a run's summary.json (no"),
])
def test_a_path_that_is_not_a_run_is_one_line_and_exit_2(tmp_path, capsys, make, message):
    a = _write(tmp_path / "a", BASE)
    assert main(["diff", str(a), str(make(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1
    with pytest.raises(ValueError, match="summary.json|no such"):
        read_summary(make(tmp_path))


def _text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_plugin_store_s_metrics_keep_their_family_s_groups_without_its_plugin():
    """``diff`` of a plugin's runs, its plugin not loaded: the family is the
    one whose groups name the metrics, not everything under ``other``."""
    plugin = {**BASE, "store": "my_team.not_loaded_here"}
    other = {**plugin, "cap_overshoot_microdollars_total": 5, "store_logic_began": "its call"}
    found = dict(differences(plugin, other))
    assert set(found) == {"cap", "the store's own damage, exposed by"}

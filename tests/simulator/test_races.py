"""The race-report catalogue replays, and replay tells what changed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.races import load_report, replay
from simulator.scenario import ScenarioError

REPO = Path(__file__).resolve().parents[2]
REPORTS = sorted((REPO / "data" / "races").glob("*.toml"))


def copy_report(source: Path, directory: Path, old: str = "", new: str = "") -> Path:
    """A copy of a report elsewhere (its scenario path made absolute), with a change."""
    text = source.read_text().replace('scenario = "../scenarios/',
                                      f'scenario = "{REPO}/data/scenarios/')
    copied = directory / source.name
    copied.write_text(text.replace(old, new))
    return copied


@pytest.mark.parametrize("path", REPORTS, ids=lambda path: path.stem)
def test_every_report_reproduces_on_its_variant_and_holds_on_the_fixed_store(path):
    report = load_report(path)
    broken = replay(report)
    assert broken.reproduced, (report.invariant, broken.value)
    assert broken.divergence is None
    assert broken.result.summary["trace_fingerprint"] == report.fingerprint
    fixed = replay(report, against_fixed=True)
    assert not fixed.reproduced, (report.invariant, fixed.value)


def test_the_catalogue_readme_lists_every_report():
    readme = (REPO / "data" / "races" / "README.md").read_text()
    assert len(REPORTS) >= 4
    for path in REPORTS:
        assert f"`{path.stem}`" in readme


def test_a_changed_trace_is_reported_with_the_first_event_that_differs(tmp_path):
    source = REPO / "data" / "races" / "claim-without-slot-loses-spend.toml"
    copied = copy_report(source, tmp_path,
                         '"migrations.0.to" = "axond_budget.variants.claim_without_slot"',
                         '"migrations.0.to" = "axond_budget.variants.claim_without_slot"\n'
                         '"migrations.0.at" = "1100ms"')
    shutil.copy(source.with_suffix(".trace.parquet"), copied.with_suffix(".trace.parquet"))
    found = replay(load_report(copied))
    assert found.divergence is not None
    assert found.divergence.startswith("event #")
    assert "recorded t=" in found.divergence and "now t=" in found.divergence


def test_replay_exits_1_when_the_invariant_holds(tmp_path):
    source = REPO / "data" / "races" / "split-settlement-lost-release-reply.toml"
    unbroken = copy_report(source, tmp_path, 'store = "axond_budget.variants.split_settlement"',
                           'store = "axond_budget.redis_v1"')
    result = subprocess.run([sys.executable, "-m", "simulator", "replay", str(unbroken)],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 1
    assert "NOT REPRODUCED: conservation_drift_microdollars_total = 0 instead" in result.stdout


def test_a_report_without_an_invariant_is_refused(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('title = "x"\nscenario = "x.toml"\nseed = 1\n[variant]\n')
    with pytest.raises(ScenarioError, match="missing invariant"):
        load_report(bad)


def test_replay_draws_the_timeline_of_the_race(tmp_path):
    picture = tmp_path / "timeline.png"
    result = subprocess.run(
        [sys.executable, "-m", "simulator", "replay",
         str(REPO / "data/races/split-settlement-lost-release-reply.toml"), "--plot",
         str(picture)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert f"timeline: {picture}" in result.stdout
    assert "trace fingerprint matches the report" in result.stdout  # sampling changed nothing
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert picture.stat().st_size > 20_000

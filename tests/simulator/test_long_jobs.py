"""Campaigns that run for hours (issue 41): each judged item journalled as it
is judged, a killed campaign resumed to the table an uninterrupted one gives,
and progress a person (or a CI log) can read."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from processes import left_behind

from simulator.cli import main
from simulator.sweeps.journal import JOURNAL, Journal
from simulator.sweeps.progress import ItemProgress

REPO = Path(__file__).resolve().parents[2]
LEASES = REPO / "data" / "scenarios" / "hunt" / "leases-release-never-retried-quiet.toml"
CAMPAIGN = ["--operators", "constant", "--code", "lua", "--schedules", "2",
            "--faults", "lose_reply"]
UNDER_WAY_WITHIN_S = 300


def leases_fixed(tmp_path: Path) -> Path:
    """The quiet lease scenario on the fixed store."""
    path = tmp_path / "leases-fixed.toml"
    path.write_text(LEASES.read_text().replace(
        'store = "axond_leases.variants.release_never_retried"', 'store = "axond_leases.redis"'))
    return path


def test_a_journal_keeps_each_record_and_drops_a_line_a_kill_cut_short(tmp_path):
    journal = Journal.start(tmp_path, {"command": "mutate", "mutants": ["a", "b"]})
    journal.append({"row": {"number": 1}})
    journal.append({"row": {"number": 2}})
    with open(tmp_path / JOURNAL, "a", encoding="utf-8") as file:
        file.write('{"row": {"numb')  # a kill mid-write
    again = Journal.resume(tmp_path, "mutate")
    assert again.job == {"command": "mutate", "mutants": ["a", "b"]}
    assert again.records == [{"row": {"number": 1}}, {"row": {"number": 2}}]
    again.append({"row": {"number": 3}})  # after the torn line's removal: the file reads whole
    assert [json.loads(line) for line in (tmp_path / JOURNAL).read_text().splitlines()][1:] \
        == [{"row": {"number": 1}}, {"row": {"number": 2}}, {"row": {"number": 3}}]
    with pytest.raises(ValueError, match="is not a bench journal"):
        Journal.resume(tmp_path, "bench")
    with pytest.raises(ValueError, match="holds no mutate journal"):
        Journal.resume(tmp_path / "elsewhere", "mutate")


def test_progress_off_a_terminal_is_a_plain_line_per_item_with_counts_and_time():
    lines: list[str] = []
    progress = ItemProgress(3, "mutate", done=1, found=1, echo=lines.append, live=False)
    progress.judging(["2 acquire:15"])
    progress.item("  2 acquire:15: detected", found=True)
    progress.item("  3 acquire:16: survived", found=False)
    progress.close()
    assert lines[0].startswith("[2/3, 2 found, ") and "left]" in lines[0]
    assert lines[0].endswith("  2 acquire:15: detected")
    assert lines[1].startswith("[3/3, 2 found, ") and "left" not in lines[1]


def _table(out: Path) -> pd.DataFrame:
    # Wall time is the only column a resumed campaign may differ in.
    return pd.read_parquet(out / "mutants.parquet").drop(columns=["seconds"])


def test_a_campaign_killed_mid_way_resumes_to_the_table_an_uninterrupted_one_gives(
        tmp_path, capsys):
    scenario = leases_fixed(tmp_path)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main(["mutate", str(scenario), *CAMPAIGN, "--out", str(whole)]) == 0
    capsys.readouterr()
    total = len(_table(whole))
    campaign = subprocess.Popen(
        [sys.executable, "-m", "simulator", "mutate", str(scenario), *CAMPAIGN,
         "--workers", "2", "--out", str(killed)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    journal = killed / JOURNAL
    deadline = time.monotonic() + UNDER_WAY_WITHIN_S
    while not (journal.exists() and len(journal.read_text().splitlines()) >= 4):
        assert campaign.poll() is None, campaign.communicate()
        assert time.monotonic() < deadline, "never under way"
        time.sleep(0.05)
    campaign.send_signal(signal.SIGKILL)  # the driver alone: its workers follow it
    campaign.communicate(timeout=60)
    assert left_behind(campaign.pid) == {}
    kept = len(journal.read_text().splitlines()) - 1
    assert 3 <= kept < total, "the kill came too late to test a resume"
    assert not (killed / "mutants.parquet").exists()
    assert main(["mutate", "--resume", str(killed)]) == 0
    printed = capsys.readouterr().out
    assert f"{kept} judged before, resumed" in printed
    assert sum(line.startswith("[") for line in printed.splitlines()) == total - kept
    pd.testing.assert_frame_equal(_table(killed), _table(whole))


def test_resume_refuses_what_would_change_the_campaign(tmp_path, capsys):
    scenario = leases_fixed(tmp_path)
    out = tmp_path / "out"
    assert main(["mutate", str(scenario), "--operators", "early_return", "--schedules", "1",
                 "--faults", "lose_reply", "--out", str(out)]) == 0
    assert main(["mutate", "--resume", str(out), "--schedules", "5"]) == 2
    assert "give only --workers or --scheduler with it, not --schedules" in \
        capsys.readouterr().err
    assert main(["mutate", "--resume", str(tmp_path / "nothing")]) == 2
    assert "holds no mutate journal" in capsys.readouterr().err
    # A finished campaign resumed judges nothing and writes the same table.
    before = _table(out)
    assert main(["mutate", "--resume", str(out)]) == 0
    assert "1 judged before, resumed" in capsys.readouterr().out
    pd.testing.assert_frame_equal(_table(out), before)
    scenario.write_text(scenario.read_text() + "\n# edited since\n")
    assert main(["mutate", "--resume", str(out)]) == 2
    assert "the scenario's text changed since" in capsys.readouterr().err
    assert main(["mutate"]) == 2
    assert "give a scenario TOML file, or --resume DIR" in capsys.readouterr().err


QUICK_LEASES = ["uncompensated_abandon", "trusts_misaligned_reply", "process_local_lease_ids"]


def quick_plans(tmp_path: Path) -> Path:
    """The lease family's plan, its quick variants alone, as the only plan."""
    plans = tmp_path / "plans"
    plans.mkdir()
    text = (REPO / "data" / "rediscovery" / "axond_leases.toml").read_text()
    head, *variants = text.split("[[variants]]")
    kept = [each for each in variants if any(f'.variants.{name}"' in each
                                             for name in QUICK_LEASES)]
    (plans / "axond_leases.toml").write_text("[[variants]]".join([head, *kept]))
    return plans


def test_a_rediscovery_stopped_mid_way_resumes_to_the_results_of_one_never_stopped(
        tmp_path, monkeypatch):
    from simulator.bench import rediscovery

    monkeypatch.setattr(rediscovery, "PLANS", quick_plans(tmp_path))
    whole = rediscovery.run_rediscovery(out_dir=tmp_path / "whole", echo=lambda line: None)
    assert [result.kind.rsplit(".", 1)[1] for result in whole] == QUICK_LEASES
    hunted = rediscovery.rediscover

    def stopped_at_the_second(plan, variant, workers=1):
        if variant.kind.endswith(QUICK_LEASES[1]):
            raise KeyboardInterrupt  # as Ctrl-C lands mid-hunt
        return hunted(plan, variant, workers)

    monkeypatch.setattr(rediscovery, "rediscover", stopped_at_the_second)
    with pytest.raises(KeyboardInterrupt) as stop:
        rediscovery.run_rediscovery(out_dir=tmp_path / "stopped", echo=lambda line: None)
    assert stop.value.__notes__ == [
        f"1 variant(s) found or not, kept in {tmp_path / 'stopped' / JOURNAL}: "
        f"go on with bench --resume {tmp_path / 'stopped'}"]
    monkeypatch.setattr(rediscovery, "rediscover", hunted)
    lines: list[str] = []
    again = rediscovery.run_rediscovery(out_dir=tmp_path / "stopped", resume=True,
                                        echo=lines.append, live=False)
    assert [(each.kind, each.found, each.schedules, each.faults, each.verdict)
            for each in again] == [(each.kind, each.found, each.schedules, each.faults,
                                    each.verdict) for each in whole]
    assert sum(line.endswith("(kept from before)") for line in lines) == 1
    assert sum(line.startswith("[") for line in lines) == 2


def test_bench_power_runs_a_family_s_campaigns_against_the_targets_and_goes_on_after_a_stop(
        tmp_path, monkeypatch, capsys):
    from simulator.mutate import power

    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "axond_leases.toml").write_text(
        f'schedules = 1\nbudget = "30s"\n[[campaigns]]\nscenario = "{leases_fixed(tmp_path)}"\n'
        'operators = ["early_return", "relational"]\ncode = ["lua"]\n')
    monkeypatch.setattr(power, "PLANS", plans)
    out = tmp_path / "power"
    assert main(["bench", "--power", "axond_leases", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    (verdict,) = [line for line in printed if line.startswith("axond_leases: ")]
    campaign = out / "leases-release-never-retried-quiet"
    rows = pd.read_parquet(campaign / "mutants.parquet")
    detected = int(rows["detected"].sum())
    assert f"kill rate {detected} of " in verdict and "lines reached " in verdict
    assert "target >= 90%" in verdict and "target <= 5%" in verdict
    # Run again: the campaign goes on from its journal, judging nothing anew.
    assert main(["bench", "--power", "axond_leases", "--out", str(out)]) == 0
    again = capsys.readouterr().out
    assert f"{len(rows)} judged before, resumed" in again
    assert verdict in again.splitlines()
    assert main(["bench", "--power", "nosuch"]) == 2
    assert "no plan for nosuch" in capsys.readouterr().err


def test_a_mutant_judged_in_two_campaigns_counts_once_as_the_furthest_went():
    from simulator.mutate.campaign import MutantRow
    from simulator.mutate.power import merged

    def row(kind: str, detected: bool = False, survived_as: str = "") -> MutantRow:
        return MutantRow(1, kind, "s", 1, "constant", "c", "d", "differs", "",
                         detected=detected, survived_as=survived_as)

    found = merged([row("a", survived_as="not reached"), row("a", detected=True),
                    row("b", survived_as="equivalent"), row("b", survived_as="undetected"),
                    row("c", survived_as="not reached"), row("c", survived_as="equivalent")])
    assert {each.kind: (each.detected, each.survived_as) for each in found} == {
        "a": (True, ""), "b": (False, "undetected"), "c": (False, "equivalent")}


def test_every_family_has_a_power_plan_whose_campaigns_load():
    from simulator.families import SHIPPED
    from simulator.mutate.power import ROOT, power_plans
    from simulator.scenario.model import load_scenario

    plans = power_plans()
    assert sorted(plan.family for plan in plans) == sorted(SHIPPED)
    for plan in plans:
        for campaign in plan.campaigns:
            scenario = load_scenario(ROOT / campaign.scenario)
            assert scenario.store.split(".")[0] == plan.family, campaign.scenario
            assert scenario.name == campaign.scenario.stem


def test_more_workers_than_memory_holds_are_refused_in_one_line(tmp_path, capsys):
    scenario = leases_fixed(tmp_path)
    scenario.write_text(scenario.read_text() + '\n[limits]\nmax_memory = "1GiB"\n')
    assert main(["mutate", str(scenario), "--code", "lua", "--workers", "100000",
                 "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: --workers 39: 39 local processes")

"""A run's reach: the store lines it executed (``simulator.reach``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simulator.mutate.python import mutant_class, mutations
from simulator.reach.lines import REACH, REACHED, TOTAL, Reach, lines_of, spans, union_of
from simulator.reach.lua_lines import runnable_lines
from simulator.reach.record import own_class
from simulator.reach.replay import replayed_lines
from simulator.run.compose import Run, run_scenario
from simulator.scenario.model import load_scenario
from stores.axond_leases.limiter import LeaseLimiter

ROOT = Path(__file__).resolve().parents[2]
LEASES = ROOT / "data" / "scenarios" / "hunt" / "axond-leases.toml"
LIMITER = "stores/axond_leases/limiter.py: LeaseLimiter"
ACQUIRE = "stores/axond_leases/acquire.lua"
COMPENSATING_RELEASE = 197
"""limiter.py: the release sent after an acquire whose reply was lost."""


def test_the_lines_a_script_can_run_are_its_instructions_lines() -> None:
    body = ("-- a comment\n"
            "local x = tonumber(ARGV[1])\n"
            "\n"
            "if x > 1 then\n"
            "  x = x + 1\n"
            "else\n"
            "  x = 0\n"
            "end\n"
            "local function twice(v)\n"
            "  return v * 2\n"
            "end\n"
            "return twice(x)")
    # Comments, blank lines, `else` and a block's `end` hold no instruction;
    # a function's `end` holds its closure (run when the definition is).
    assert runnable_lines(body) == {2, 4, 5, 7, 10, 11, 12}


def test_spans_read_back_and_reaches_add_up() -> None:
    assert spans([5, 1, 2, 3, 9, 10]) == "1-3,5,9-10"
    assert lines_of("1-3,5,9-10") == {1, 2, 3, 5, 9, 10}
    first = Reach({"a.lua": frozenset({1, 2, 3})}, {"a.lua": frozenset({1})})
    second = Reach({"a.lua": frozenset({1, 2, 3}), "b.py: B": frozenset({7})},
                   {"a.lua": frozenset({3}), "b.py: B": frozenset()})
    both = union_of([first, second])
    assert (both.count, both.total) == (2, 4)
    assert both.gaps() == ["a.lua: 2", "b.py: B: 7"]
    assert Reach.decode(both.encode()) == both
    assert both.account().startswith("store lines reached 2 of 4 (50%); never reached:")


def _reach(summary: dict) -> Reach:
    return Reach.decode(summary[REACH])


@pytest.fixture(scope="module")
def fault_free() -> dict:
    return run_scenario(load_scenario(LEASES), backend="fakeredis", coverage=True).summary


def test_a_run_asked_for_its_reach_counts_the_store_lines_and_runs_the_same(fault_free) -> None:
    plain = run_scenario(load_scenario(LEASES), backend="fakeredis").summary
    assert fault_free["trace_fingerprint"] == plain["trace_fingerprint"]
    assert REACH not in plain
    reach = _reach(fault_free)
    assert 0 < fault_free[REACHED] < fault_free[TOTAL] == reach.total
    assert fault_free["store_reach_replay_diverged"] == 0
    # The acquire script's every line but the one dropping an expired lease.
    assert reach.missed(ACQUIRE) == [25]
    assert COMPENSATING_RELEASE not in reach.reached[LIMITER]


def test_lost_replies_reach_the_compensating_release(fault_free) -> None:
    lossy = run_scenario(load_scenario(LEASES, {"network.reply_loss": 0.05}),
                         backend="fakeredis", coverage=True).summary
    reach = _reach(lossy)
    assert COMPENSATING_RELEASE in reach.reached[LIMITER]
    assert lossy[REACHED] > fault_free[REACHED]


def test_the_reach_is_the_same_on_every_backend(backend_name, backend_url, fault_free) -> None:
    summary = run_scenario(load_scenario(LEASES), backend=backend_url, coverage=True).summary
    assert summary["store_reach_replay_diverged"] == 0
    assert summary[REACH] == fault_free[REACH]


def test_a_replay_that_cannot_follow_the_run_says_so() -> None:
    run = Run(load_scenario(LEASES), backend="fakeredis", coverage=True)
    run.advance(run.end_us + 1)
    run.finish()
    log, bodies = run.recorder.log, list(run.recorder.bodies)
    assert replayed_lines(log, bodies).diverged == 0
    # One answer the server gave, told otherwise: the replay's no longer matches it.
    index = next(i for i, entry in enumerate(log.entries) if entry[0] == "run" and entry[6])
    log.entries[index] = (*log.entries[index][:7], ("not", "what", "the", "server", "said"))
    assert replayed_lines(log, bodies).diverged == 1


def test_a_mutant_class_counts_as_its_base() -> None:
    mutation = next(item for item in mutations(LeaseLimiter) if item.line == 197)
    mutant = mutant_class(LeaseLimiter, mutation)
    assert mutant is not LeaseLimiter and own_class(mutant) is LeaseLimiter


def test_run_coverage_prints_the_lines_never_reached(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "run", str(LEASES), "--coverage", "--quiet",
         "--backend", "fakeredis", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "store lines reached 71 of 120 (59%); never reached:" in done.stdout
    assert f"  {ACQUIRE}: 25\n" in done.stdout
    assert '{"' not in done.stdout  # the reach's record is told in words, not dumped


def test_a_hunt_adds_up_its_runs_reach_alike_with_any_workers(fault_free) -> None:
    from simulator.search.hunt import Hunt

    reaches = []
    for workers in (1, 2):
        hunt = Hunt(LEASES, reference="axond_leases.redis", examples=6, seed=3,
                    workers=workers, coverage=True, overrides={"backend": "fakeredis"})
        assert hunt.search() is None
        reaches.append(hunt.reach)
    one, two = reaches
    assert one == two
    assert one.count > fault_free[REACHED]  # the faults reached what the fault-free run did not
    assert one.reached[LIMITER] >= _reach(fault_free).reached[LIMITER]


def test_a_mutant_s_line_is_reached_where_a_fault_takes_the_run(tmp_path) -> None:
    """A mutant that drops the compensating release: its marks come from its
    own mutated source, so its line counts where its base has it; no
    fault-free run reaches it, a lost reply does (``mutate``'s "not reached")."""
    from simulator.mutate.campaign import mutated_line_reached
    from simulator.mutate.kinds import write_plugin
    from stores import registry

    base = registry.get("axond_leases.redis")
    mutation = next(item for item in mutations(LeaseLimiter)
                    if item.line == COMPENSATING_RELEASE and item.operator == "call_removed")
    write_plugin(tmp_path, base.name, [("axond_leases.redis.mutant.9401", mutation)])
    original = vars(LeaseLimiter)[mutation.method]
    reaches = []
    for loss in (0.0, 0.05):
        scenario = load_scenario(LEASES, {"network.reply_loss": loss,
                                          "store": "axond_leases.redis.mutant.9401"})
        reaches.append(_reach(run_scenario(scenario, backend="fakeredis",
                                           coverage=True).summary))
    plain, lossy = reaches
    assert not mutated_line_reached(base, mutation, plain)
    assert mutated_line_reached(base, mutation, lossy)
    assert vars(LeaseLimiter)[mutation.method] is original  # the store's own is back


def test_the_html_report_marks_each_line_reached_or_never_reached(fault_free, tmp_path) -> None:
    from simulator.present.reach_page import reach_section

    section = reach_section(fault_free)
    assert section.startswith("<section id='reach'><h2>Store lines reached</h2>")
    acquire = section[section.index(f"{ACQUIRE}: 15 of 16 lines reached"):]
    acquire = acquire[:acquire.index("</details>")]
    assert "<span class='missed'><span class='number'>  25</span>" in acquire
    assert "<span class='reached'><span class='number'>  15</span>" in acquire
    assert "<span><span class='number'>   1</span>  -- " in acquire  # a comment: no mark
    limiter = section[section.index(f"{LIMITER}: "):]
    assert (f"<span class='missed'><span class='number'> {COMPENSATING_RELEASE}</span>"
            in limiter)
    assert reach_section({"store": "axond_leases.redis"}) == ""  # not asked: no section


def test_a_sweep_asked_for_its_reach_prints_the_union_over_its_runs(tmp_path, capsys) -> None:
    from simulator.cli import main

    sweep = tmp_path / "reach.toml"
    sweep.write_text(f'name = "reach"\nscenario = "{LEASES}"\nbackend = "fakeredis"\n'
                     'coverage = true\n[vary]\n"network.reply_loss" = [0.0, 0.05]\n')
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "out"), "--workers", "1",
                 "--quiet"]) == 0
    printed = capsys.readouterr().out
    lossy = _reach(run_scenario(load_scenario(LEASES, {"network.reply_loss": 0.05}),
                                backend="fakeredis", coverage=True).summary)
    assert f"over the sweep's 2 run(s), {lossy.headline()}" in printed


@pytest.mark.parametrize("family", ["axond-budget", "av-state", "tollgate"])
def test_recording_the_reach_changes_no_run_of_any_family(family: str) -> None:
    """The marks and the server's log only watch: the same trace, every figure
    the same, with or without them (the leases family: above)."""
    scenario = load_scenario(ROOT / "data" / "scenarios" / "hunt" / f"{family}.toml")
    plain = run_scenario(scenario).summary
    recorded = run_scenario(scenario, coverage=True).summary
    added = {REACH, REACHED, TOTAL, "store_reach_replay_diverged", "store_state_digest"}
    assert {key: value for key, value in recorded.items() if key not in added} == plain
    assert 0 < recorded[REACHED] < recorded[TOTAL]
    assert recorded.get("store_reach_replay_diverged", 0) == 0


def test_a_script_that_includes_a_fragment_counts_its_lines_in_both_files(tmp_path) -> None:
    """The budget's reserve scripts run as the ``live_holds`` fragment then
    their own text (``-- lab:include``): each line is counted in its file."""
    scenario = Path(__file__).resolve().parents[2] / "data" / "scenarios" / "hunt" / (
        "axond-budget.toml")
    reach = Reach.decode(run_scenario(load_scenario(
        scenario, {"duration": "2s", "drain": "2s"}), coverage=True).summary[REACH])
    fragment, reserve = "stores/axond_budget/live_holds.lua", "stores/axond_budget/reserve_v1.lua"
    # Every reserve runs the fragment's loop over the subject's holds and its own body.
    assert len(reach.reached[fragment]) >= len(reach.runnable[fragment]) - 2
    assert len(reach.reached[reserve]) >= len(reach.runnable[reserve]) // 2
    assert reach.reached[reserve] <= reach.runnable[reserve]


def test_a_changed_copy_of_a_script_another_kind_sends_is_counted_apart() -> None:
    """A mutant's migration script is not the migration target's: the
    target's unchanged copy running says nothing of the mutant's lines."""
    from simulator.reach.record import ReachRecorder
    from stores import registry

    v1, v2 = registry.get("axond_budget.redis_v1"), registry.get("axond_budget.redis_v2")
    changed = v1.scripts["migration_apply"].replace("return", "return  ", 1)
    mutant = v1.with_scripts("axond_budget.redis_v1.mutant.test",
                             v1.scripts.replacing(migration_apply=changed))
    recorder = ReachRecorder([mutant, v2])
    unit = "stores/axond_budget/migration_apply.lua"
    assert unit in recorder.runnable
    assert f"{unit} (axond_budget.redis_v2's)" in recorder.runnable
    assert recorder.bodies[v2.scripts.source("migration_apply")].unit == \
        f"{unit} (axond_budget.redis_v2's)"
    assert recorder.bodies[changed].unit == unit
    # Unchanged copies are one unit, as in any run of the shipped kinds.
    assert not any("'s)" in each for each in ReachRecorder([v1, v2]).runnable)

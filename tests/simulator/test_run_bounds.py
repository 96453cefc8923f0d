"""Every run bounded before it starts, and guarded while it runs.

A scenario whose work (kernel events, memory, keys), estimated from its
parameters (``simulator.run.estimate``), passes its limits
(``simulator.run.limits``: ``[limits]`` or ``--max-events``, ``--max-memory``,
``--max-keys``) is refused at once, one line naming the field that drives the
work, the estimate and the limit, exit 2; one whose work the estimate did not
foresee is stopped by the guard the kernel calls as it runs. The estimate is
held to the runs it estimates: live for cheap committed scenarios, and
against recorded measurements for the large ones.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.cli import USER_ERROR, main
from simulator.engine.kernel import Kernel
from simulator.engine.traps import Sleep
from simulator.run import limits as run_limits
from simulator.run import preflight
from simulator.run.compose import resolve_backend
from simulator.run.estimate import estimate_work
from simulator.run.limits import WorkLimitExceeded, format_bytes, parse_memory_bytes
from simulator.scenario.model import load_scenario
from simulator.sweeps import load_sweep

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "data" / "scenarios"
CHEAP = SCENARIOS / "exactness-hot-namespace.toml"
"""20 replicas for 4 s, about 9,000 kernel events (estimated about 10,000): a second's run."""
FACTOR = 3.0
"""How far the estimate may be from a measured run, either way."""
SMALL_RUN_SLACK = 3_000
"""Events by which a run of fewer than 10,000 may miss, whatever the factor says."""


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    started = time.perf_counter()
    code = main(argv)
    return code, capsys.readouterr().err, time.perf_counter() - started


def one_line(error: str) -> str:
    lines = error.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in error, error
    return lines[0]


# ------------------------------------------------------------ refused up front

@pytest.mark.parametrize("setting", [
    'faults.crash={rate="1e308/s"}',
    'faults.pause={rate="1e308/s", duration="1s"}',
    'workload.arrivals="poisson(1e308/s)"',
    "workload.keys.subjects=1000000000",
])
def test_the_issues_examples_are_refused_at_once_in_one_line(setting, capsys, tmp_path):
    code, error, seconds = run_cli(["run", str(CHEAP), "--set", setting, "--quiet",
                                    "--out", str(tmp_path / "out")], capsys)
    assert code == USER_ERROR
    assert setting.split("=")[0] in one_line(error)
    assert seconds < 2 and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("setting", "field", "limits"), [
    # The fastest rate a field takes, drawn once per replica: 80 million crashes.
    ('faults.crash={rate="1000000/s"}', "faults.crash.rate", "limits.max_events"),
    ('faults.connection_reset={rate="1000000/s"}', "faults.connection_reset.rate",
     "limits.max_events"),
    ('workload.arrivals="poisson(1000000/s) per replica"', "workload.arrivals",
     "limits.max_events"),
    ('duration="3650d"', "workload.arrivals", "limits.max_events"),
    # A million subjects sampled one row each, every millisecond.
    ('metrics={per_key=true, sample_every="1ms"}', "metrics.per_key", "limits.max_memory"),
])
def test_work_past_the_default_limits_is_refused_before_anything_runs(
        setting, field, limits, capsys, tmp_path):
    code, error, seconds = run_cli(["run", str(CHEAP), "--set", setting, "--set",
                                    "workload.keys.subjects=1000000", "--quiet",
                                    "--out", str(tmp_path / "out")], capsys)
    line = one_line(error)
    assert code == USER_ERROR
    assert line.startswith("error: ") and f"{field}: the run would take about " in line
    assert limits in line and "raise the limit" in line and "[limits]" in line
    assert seconds < 2 and not (tmp_path / "out").exists()


def test_check_reports_the_refusal_and_the_estimate_of_a_run_that_fits(capsys):
    code, error, _ = run_cli(["check", str(CHEAP), "--set", 'duration="3650d"'], capsys)
    assert code == USER_ERROR and "limits.max_events" in one_line(error)
    assert main(["check", str(CHEAP)]) == 0
    work = capsys.readouterr().out.splitlines()[-1]
    assert work.startswith("work: about ") and "kernel events" in work
    assert "(limits: 200 million events" in work


def test_a_refusal_names_the_limit_it_passes_and_the_flag_that_raises_it(capsys):
    code, error, _ = run_cli(["check", str(CHEAP), "--max-keys", "3"], capsys)
    assert code == USER_ERROR
    assert one_line(error).endswith(
        "workload.keys.subjects: the run would take 5 keys, past its limit of 3 keys "
        "(limits.max_keys); make the scenario smaller, or raise the limit with --max-keys N "
        "or in the scenario's [limits] table")


def test_a_raised_limit_lets_a_borderline_scenario_run(capsys, tmp_path):
    scenario = load_scenario(CHEAP)
    estimated = estimate_work(scenario, resolve_backend(scenario, None)).kernel_events
    below, above = int(estimated * 0.8), int(estimated * 1.2)
    code, error, _ = run_cli(["run", str(CHEAP), "--max-events", str(below), "--quiet",
                              "--out", str(tmp_path / "a")], capsys)
    assert code == USER_ERROR and "limits.max_events" in one_line(error)
    assert main(["run", str(CHEAP), "--max-events", str(above), "--quiet",
                 "--out", str(tmp_path / "b")]) == 0
    # The same limit from the scenario's own table.
    assert main(["run", str(CHEAP), "--set", f"limits.max_events={above}", "--quiet",
                 "--out", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    # A flag beats the table.
    code, error, _ = run_cli(["check", str(CHEAP), "--set", f"limits.max_events={above}",
                              "--max-events", str(below)], capsys)
    assert code == USER_ERROR


def test_memory_limits_are_read_as_people_write_them():
    assert parse_memory_bytes("16GiB") == 16 * 2**30
    assert parse_memory_bytes("512 MiB") == 512 * 2**20
    assert parse_memory_bytes("2GB") == 2 * 10**9
    assert format_bytes(8 * 2**30) == "8GiB" and format_bytes(1.5 * 2**30) == "1.5GiB"
    for wrong in ("16", "16 gigs", True, 12.5, "0MiB"):
        with pytest.raises(ValueError, match="memory size"):
            parse_memory_bytes(wrong)


def test_bad_limit_flags_are_refused_naming_the_flag(capsys):
    for flag, value in (("--max-events", "0"), ("--max-events", "lots"),
                        ("--max-memory", "16 gigs")):
        with pytest.raises(SystemExit) as stop:
            main(["check", str(CHEAP), flag, value])
        assert stop.value.code == USER_ERROR
        assert f"argument {flag}: expected" in capsys.readouterr().err


def test_the_default_memory_limit_is_at_most_half_of_the_machine(monkeypatch):
    monkeypatch.setattr(run_limits, "machine_memory", lambda: 4 * 2**30)
    assert run_limits.default_max_memory() == 2 * 2**30
    monkeypatch.setattr(run_limits, "machine_memory", lambda: 64 * 2**30)
    assert run_limits.default_max_memory() == 8 * 2**30


def test_a_sweep_with_a_point_past_its_limits_runs_nothing(capsys, tmp_path):
    sweep = tmp_path / "big.toml"
    sweep.write_text(f'name = "big"\nscenario = "{CHEAP}"\n'
                     '[vary]\n"duration" = ["2s", "3650d"]\n')
    code, error, _ = run_cli(["sweep", str(sweep), "--quiet", "--out", str(tmp_path / "out")],
                             capsys)
    line = one_line(error)
    assert code == USER_ERROR and not (tmp_path / "out").exists()
    assert "the point {'duration': '3650d'}: workload.arrivals: the run would take" in line
    # Raised for every point, the sweep would run it.
    raised = load_sweep(sweep, set_fields={"limits.max_events": 10**15,
                                           "limits.max_memory": "1024TiB"})
    assert all(not preflight.over_limits(raised.scenario_at(point)) for point in raised.points)


def test_a_hunt_past_its_limits_runs_nothing(capsys):
    code, error, _ = run_cli(["hunt", str(CHEAP), "--invariant", "false_denials > 0",
                              "--max-events", "100"], capsys)
    assert code == USER_ERROR and "limits.max_events" in one_line(error)


@pytest.mark.parametrize("command", ["hunt", "sweep"])
def test_more_local_workers_than_the_memory_limit_holds_are_refused_before_any_run(
        command, capsys, tmp_path):
    out = tmp_path / "out"
    if command == "hunt":
        args = ["hunt", str(CHEAP), "--invariant", "false_denials > 0", "--out",
                str(out / "found.toml")]
    else:
        sweep = tmp_path / "small.toml"
        sweep.write_text(f'name = "small"\nscenario = "{CHEAP}"\n[vary]\nduration = ["2s"]\n')
        args = ["sweep", str(sweep), "--quiet", "--out", str(out)]
    code, error, _ = run_cli([*args, "--workers", "300", "--max-memory", "4GiB"], capsys)
    line = one_line(error)
    assert code == USER_ERROR and not out.exists()
    assert line.startswith("error: --workers 300: 300 local processes") and "past the memory " \
        "limit of 4GiB; use --workers" in line, line
    assert 1 <= int(line.split("use --workers ")[1].split()[0]) < 300


def test_workers_are_refused_exactly_past_the_memory_limit():
    limits = run_limits.RunLimits(max_events=10**9, max_memory=1000, max_keys=10**6,
                                  memory_is_default=False)
    run_limits.refuse_workers_beyond(10, 100, limits)  # 1,000 bytes: fits
    with pytest.raises(WorkLimitExceeded, match="use --workers 10 or fewer"):
        run_limits.refuse_workers_beyond(11, 100, limits)
    # One worker is one run, which the run's own limits judge.
    run_limits.refuse_workers_beyond(1, 5000, limits)


# --------------------------------------------------------------- guarded as it runs

def test_the_kernel_calls_its_guard_every_so_many_events_across_runs():
    kernel = Kernel(seed=1)
    seen: list[int] = []

    def guard() -> int:
        seen.append(kernel.events_run)
        return 10

    async def ticker():
        while True:
            await Sleep(1)

    kernel.spawn(ticker(), kernel.new_owner("r0"), "ticker")
    kernel.set_guard(guard, 10)
    for until in range(7, 70, 7):  # stretches that do not line up with the guard's
        kernel.run(until)
    assert seen == [10, 20, 30, 40, 50, 60]


def test_a_guard_that_raises_stops_the_run_before_the_next_event():
    kernel = Kernel(seed=1)
    ran: list[int] = []
    for at in range(100):
        kernel.at(at, ran.append, at)

    def guard() -> int:
        raise WorkLimitExceeded("enough")

    kernel.set_guard(guard, 25)
    with pytest.raises(WorkLimitExceeded, match="enough"):
        kernel.run(1_000)
    assert ran == list(range(25)) and kernel.events_run == 25


def test_the_guard_stops_a_run_whose_estimate_was_fooled(capsys, tmp_path):
    # A store whose boot never answers (every call times out), retried every
    # millisecond: a crash loop the parameters do not show.
    code, error, _ = run_cli(["run", str(CHEAP), "--set", 'network.timeout="100us"',
                              "--set", 'fleet.boot_retry="1ms"', "--max-events", "20000",
                              "--quiet", "--out", str(tmp_path / "out")], capsys)
    line = one_line(error)
    assert code == USER_ERROR
    assert line.startswith("error: run stopped at t=") and "(seed 1), after 20,000 events" in line
    assert "reached its limit of 20,000 kernel events (limits.max_events)" in line
    assert "--max-events N" in line


def test_the_guard_stops_a_run_past_its_memory_limit(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(run_limits, "CHECK_EVERY", 500)
    monkeypatch.setattr(run_limits, "resident_memory", lambda: 64 * 2**30)
    code, error, _ = run_cli(["run", str(CHEAP), "--max-memory", "4GiB", "--quiet",
                              "--out", str(tmp_path / "out")], capsys)
    line = one_line(error)
    assert code == USER_ERROR and line.startswith("error: run stopped at t=")
    assert "after 500 events: its memory reached 64GiB, past its limit of 4GiB" in line
    assert "--max-memory SIZE" in line


# ------------------------------------------------------- committed scenarios

COMMITTED = sorted(SCENARIOS.rglob("*.toml"))
SWEEPS = sorted((REPO / "data" / "sweeps").glob("*.toml"))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: str(path.relative_to(SCENARIOS)))
def test_every_committed_scenario_passes_the_default_limits(path, capsys):
    assert main(["check", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("path", SWEEPS, ids=lambda path: path.name)
def test_every_point_of_every_committed_sweep_passes_the_default_limits(path):
    sweep = load_sweep(path)
    assert [problem for point in sweep.points
            for problem in preflight.over_limits(sweep.scenario_at(point), sweep.backend)] == []


def assert_close(estimated: float, measured: float, slack: float = 0.0) -> None:
    assert (measured / FACTOR <= estimated <= measured * FACTOR
            or abs(estimated - measured) <= slack), (estimated, measured)


LIVE = ["hunt/leases-trusts-misaligned-reply-quiet.toml",
        "hunt/tollgate-replay-bills-twice-quiet.toml",
        "hunt/av-state-add-without-ttl-quiet.toml", "hunt/claim-without-slot-quiet.toml",
        "mutants/in-memory-eviction.toml", "tollgate-variant-reclaim-without-grace.toml",
        "leases-variant-trusts-misaligned-reply.toml", "exactness-hot-namespace.toml"]
"""The cheapest committed scenarios of each family and server, run here."""


@pytest.mark.parametrize("name", LIVE)
def test_the_estimate_is_within_three_times_of_a_measured_run(name, tmp_path):
    scenario = load_scenario(SCENARIOS / name)
    estimate = estimate_work(scenario, resolve_backend(scenario, None))
    # A process of its own: a peak RSS read inside the test session would be
    # the session's (every test before this one), not the run's.
    subprocess.run([sys.executable, "-m", "simulator", "run", str(SCENARIOS / name),
                    "--quiet", "--out", str(tmp_path), "--fail-on", "never"], cwd=REPO,
                   check=True, capture_output=True)
    run_info = json.loads((tmp_path / "run_info.json").read_text())
    assert_close(estimate.kernel_events, run_info["kernel_events"], SMALL_RUN_SLACK)
    assert_close(estimate.memory_bytes, run_info["peak_rss_mib"] * 2**20)


def test_a_runs_peak_memory_is_its_own_not_its_parents():
    # Linux keeps ru_maxrss across exec: a run started from a large process (this
    # test session, a notebook kernel) must not report that process's size.
    ballast = bytearray(512 * 2**20)
    ballast[::4096] = b"\1" * len(range(0, len(ballast), 4096))
    child = subprocess.run(
        [sys.executable, "-c", "from simulator.run.limits import peak_resident_memory;"
         "print(peak_resident_memory())"], cwd=REPO, check=True, capture_output=True,
        text=True)
    assert 0 < int(child.stdout) < 256 * 2**20
    del ballast


MEASURED = {
    # scenario: (kernel events, peak RSS in MiB of `python -m simulator run`, writing
    # included; measured on the shared two-core machine: rerun with /usr/bin/time -v)
    "bench-scale-10k.toml": (618_950, 963),
    "demo.toml": (137_416, 276),
    "fleet-5000.toml": (404_327, 548),
    "bench-2000.toml": (283_073, 411),
    "bench-leases-busy.toml": (295_838, 239),
    "bench-av-state-busy.toml": (534_521, 650),
    "in-memory-fleet.toml": (54_710, 238),
    "tollgate.toml": (50_032, 215),
    "leases.toml": (45_696, 218),
    "av-state.toml": (26_277, 218),
}
"""The larger committed scenarios, too slow to run here, as measured."""


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_the_estimate_is_within_three_times_of_the_recorded_large_runs(name):
    scenario = load_scenario(SCENARIOS / name)
    estimate = estimate_work(scenario, resolve_backend(scenario, None))
    events, peak_mib = MEASURED[name]
    assert_close(estimate.kernel_events, events)
    assert_close(estimate.memory_bytes, peak_mib * 2**20)

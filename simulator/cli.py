"""The command line: ``python -m simulator run|check|diff|replay|hunt|sweep|bench|fields|stores``.

Exit status: 0 done, 1 the simulation itself failed (a bug in a store or in
the lab: the message names the seed and the virtual time), 2 the input was
wrong (the message says which field, what was wanted, what was given) or a run
would pass, or passed, its limits (``simulator.run.limits``), 3 the run
finished but an ``[expect]`` threshold of the scenario failed.

A command's modules are imported only when it runs (in its function), so
``--help``, ``stores`` and ``fields`` start without the simulator loaded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from simulator.present.invocation import lab_command
from stores.quantities import parse_duration_us

if TYPE_CHECKING:
    from simulator.run.preflight import Examined
    from simulator.scenario.model import Scenario

USER_ERROR, SIMULATION_FAILED, EXPECTATION_FAILED = 2, 1, 3


def _duration(text: str) -> int:
    """``--trace-from 1.2s``: a duration as scenarios write them, in µs."""
    try:
        return parse_duration_us(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _override(text: str) -> tuple[str, Any]:
    """``--set network.reply_loss=0.05``: the value is read as TOML, else as text."""
    path, separator, raw = text.partition("=")
    if not separator or not path:
        raise argparse.ArgumentTypeError(f"expected PATH=VALUE, got {text!r}")
    try:
        value = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw
    return path.strip(), value


def _count(text: str) -> int:
    """``--max-events 5e8``: a whole number of at least 1 (also ``500_000_000``)."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        value = 0.0
    if not (math.isfinite(value) and value >= 1 and value.is_integer()):
        raise argparse.ArgumentTypeError(
            f"expected a whole number of at least 1, such as 500000000 or 5e8, got {text!r}")
    return int(value)


def _memory(text: str) -> int:
    """``--max-memory 16GiB``: a memory size, in bytes."""
    from simulator.run.limits import parse_memory_bytes
    try:
        return parse_memory_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


ENGINE_HELP = ("where every run's scripts execute: valkey (the lab's engine, the default where "
               "it installed), fakeredis (in-process), redis://HOST:PORT/DB; the same as "
               "--set backend=... (the same results on each)")


def _backend_override(args: argparse.Namespace) -> dict[str, Any]:
    """``hunt --backend``, as the scenario override it is."""
    return {"backend": args.backend} if args.backend else {}


def _limit_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--max-*`` flags given, as overrides of the scenario's ``[limits]``."""
    flags = {"limits.max_events": args.max_events, "limits.max_memory": args.max_memory,
             "limits.max_keys": args.max_keys}
    return {path: value for path, value in flags.items() if value is not None}


def build_parser() -> argparse.ArgumentParser:
    from simulator.scenario.faults import HUNTED_FAULTS
    parser = argparse.ArgumentParser(
        prog=lab_command(),
        description="Deterministic simulation of distributed spend and concurrency limiters.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    # --plugin, for every command that reads scenarios or store kinds.
    plugins = argparse.ArgumentParser(add_help=False)
    plugins.add_argument("--plugin", dest="plugins", action="append", default=[],
                         metavar="MODULE", help="import this Python module first: it registers "
                         "store kinds from outside the lab (found on PYTHONPATH; repeatable)")
    # --max-events, --max-memory, --max-keys, for every command that runs scenarios
    # (simulator.run.limits): the same as the scenario's [limits] table, and over it.
    limits = argparse.ArgumentParser(add_help=False)
    limits.add_argument("--max-events", type=_count, metavar="N",
                        help="kernel events a run may take: one estimated past it is refused "
                        "before it starts, one that gets there is stopped (default 200 "
                        "million; [limits] max_events)")
    limits.add_argument("--max-memory", type=_memory, metavar="SIZE",
                        help="memory a run's process may reach, e.g. 16GiB, checked the same "
                        "way (default: 8GiB or half of the machine's, whichever is smaller; "
                        "[limits] max_memory)")
    limits.add_argument("--max-keys", type=_count, metavar="N",
                        help="keys a run may hold (default 10 million; [limits] max_keys)")

    run = commands.add_parser("run", parents=[plugins, limits],
                              help="run one scenario and print its invariant summary")
    run.add_argument("scenario", type=Path, help="a scenario TOML file")
    run.add_argument("--seed", type=int, help="the run seed (default: the scenario's)")
    run.add_argument("--backend", help="memory | fakeredis | redis://HOST:PORT/DB | "
                     "redis-cluster | valkey-cluster (a throwaway local cluster of the "
                     "scenario's [server] cluster shape, of redis-server or Valkey nodes) | "
                     "postgresql://USER@HOST:PORT/DB | postgresql (a throwaway local server) "
                     "(default: the scenario's, else the store's own)")
    run.add_argument("--out", type=Path,
                     help="where to write results (default: data/results/NAME-seedN, or "
                     "NAME-STORE-seedN with --set store=...)")
    run.add_argument("--set", dest="overrides", type=_override, action="append", default=[],
                     metavar="PATH=VALUE", help="override a scenario field, e.g. "
                     "--set network.reply_loss=0.05 (repeatable)")
    run.add_argument("--allow-remote", "--allow-remote-redis", dest="allow_remote_redis",
                     action="store_true",
                     help="allow a Redis or PostgreSQL server that is not on loopback")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--verbose", action="store_true",
                     help="for an inconclusive run, print the traceback behind it")
    run.add_argument("--reference", metavar="KIND",
                     help="also run the reference store KIND under the same scenario, seed "
                     "and faults, and print, per invariant, how much worse this store did "
                     "beside what the oracle filed under store_logic (also reference.json); "
                     "PATH=KIND puts it elsewhere than the store, e.g. migrations.0.to=KIND")
    run.add_argument("--counterfactual", action="store_true",
                     help="then re-run the same seed once per fault class the scenario "
                     "injects, that class removed, and print the damage each removal takes "
                     "away beside the oracle's attribution (also counterfactual.json)")
    run.add_argument("--report", dest="html", type=Path, metavar="FILE.html",
                     help="also write one self-contained HTML page: the verdicts, the story "
                     "around the first fault, a zoomable timeline, the fault schedule and the "
                     "scenario (samples per key, as metrics.per_key = true)")
    run.add_argument("--junit", type=Path, metavar="FILE.xml",
                     help="also write the invariant verdicts and the [expect] entries as "
                     "JUnit XML, one test case each, for a CI system to show")
    run.add_argument("--force", action="store_true",
                     help="write over results a run of another scenario or store left in DIR")
    run.add_argument("--coverage", action="store_true",
                     help="also record which lines of the store's Lua scripts and of its own "
                     "Python classes ran, and print \"store lines reached R of T\" with the "
                     "lines never reached (in the summary too)")
    run.add_argument("--fail-on", choices=("store", "broken", "never"), default="store",
                     help="which verdicts fail the run with exit status 5: one that blames "
                     "the store (damage filed under store_logic; the default), any BROKEN "
                     "invariant, or none. A failed [expect] entry exits 3 whatever this says")

    replay_cmd = commands.add_parser(
        "replay", parents=[plugins],
        help="re-run a race report; REPRODUCED (exit 0) or NOT REPRODUCED (exit 1)")
    replay_cmd.add_argument("report", type=Path, help="a race report, data/races/*.toml")
    replay_cmd.add_argument("--against", choices=["fixed"],
                            help="run the report's scenario, seed and schedule on the fixed "
                            "store and show the invariant holds there")
    replay_cmd.add_argument("--trace", action="store_true",
                            help="print the events that matter, as a story")
    replay_cmd.add_argument("--record", action="store_true",
                            help="write the trace beside the report (NAME.trace.parquet) and "
                            "print its fingerprint, to commit with the report")
    replay_cmd.add_argument("--plot", type=Path, metavar="FILE.png",
                            help="draw the timeline: the involved replicas' requests, lost "
                            "calls and faults; the store's record against the truth")
    replay_cmd.add_argument("--trace-from", type=_duration, metavar="TIME",
                            help="start the story at this virtual time, e.g. 0s (default: "
                            "a few events before the first fault, lost call or damage)")
    replay_cmd.add_argument("--trace-before", type=int, default=5, metavar="N",
                            help="events told before the first fault or damage (default 5)")
    replay_cmd.add_argument("--trace-limit", type=int, default=60, metavar="N",
                            help="events told at most (default 60; 0: every one)")
    replay_cmd.add_argument("--report", dest="html", type=Path, metavar="FILE.html",
                            help="write one self-contained HTML page: the verdicts, the story, "
                            "a zoomable timeline, and the fixed store's run beside it")
    replay_cmd.add_argument("--backend", help="memory | fakeredis | redis://HOST:PORT/DB | "
                            "redis-cluster | valkey-cluster | postgresql://USER@HOST:PORT/DB")

    hunt_cmd = commands.add_parser(
        "hunt", parents=[plugins, limits],
        help="search fault schedules that break an invariant; write a race report")
    hunt_cmd.add_argument("scenario", type=Path, help="a scenario TOML file")
    hunt_cmd.add_argument("--invariant", metavar="EXPR",
                          help="the breaking condition, e.g. "
                          "'conservation_drift_microdollars_total < 0', or thresholds joined "
                          "by and / or (and binds tighter; parentheses group)")
    hunt_cmd.add_argument("--reference", metavar="KIND",
                          help="a store kind of the same family: a schedule breaks when the "
                          "scenario's store does worse than it on one of the family's "
                          "invariants (with --invariant: when either says so); "
                          "PATH=KIND puts it elsewhere than the store, e.g. "
                          "migrations.0.to=KIND for a migration's target")
    hunt_cmd.add_argument("--backend", help=ENGINE_HELP)
    hunt_cmd.add_argument("--set", dest="overrides", type=_override, action="append",
                          default=[], metavar="PATH=VALUE",
                          help="override a scenario field for every run of the hunt, and in "
                          "its race report (repeatable)")
    hunt_cmd.add_argument("--examples", type=int, default=100,
                          help="schedules to try before giving up (default 100)")
    hunt_cmd.add_argument("--seed", type=int, default=0, help="the hunt's own seed")
    hunt_cmd.add_argument("--budget", default="10m",
                          help="wall-time budget, search and shrinking (default 10m)")
    hunt_cmd.add_argument("--max-faults", type=int, default=4)
    hunt_cmd.add_argument("--faults", default=",".join(HUNTED_FAULTS),
                          help="fault kinds to draw, comma-separated (default: the four "
                          "message and replica faults); also partition, connection_stall, "
                          "connection_reset, slow_reply, dropped_waiter, an operator's "
                          "migrate, rolling_restart, reconfigure, and the server's "
                          "server_restart, failover, latency_spike; or all: every kind the "
                          "scenario can take")
    hunt_cmd.add_argument("--swarm", action="store_true",
                          help="swarm testing: each schedule draws its faults from a random "
                          "subset of the --faults kinds (rare kinds and combinations get "
                          "schedules of their own)")
    hunt_cmd.add_argument("--target", choices=["any", "replicas", "migration"], default="any",
                          help="what lost requests and replies may hit")
    hunt_cmd.add_argument("--out", type=Path, help="where to write the race report")
    hunt_cmd.add_argument("--verbose", action="store_true",
                          help="print a line for every run (default: the baseline, the run "
                          "that first broke, and a count every 25 runs)")
    hunt_cmd.add_argument("--workers", type=int, default=1, metavar="N",
                          help="local processes judging schedules at once (default 1: in "
                          "this process); the same schedule is found with any number")
    hunt_cmd.add_argument("--scheduler", metavar="ADDRESS",
                          help="judge the schedules on a Dask cluster, e.g. "
                          "tcp://10.0.0.5:8786 (its workers need the lab and the plugins)")
    hunt_cmd.add_argument("--no-coverage", dest="coverage", action="store_false",
                          help="do not record which store lines each run reached (no "
                          "\"store lines reached R of T\" at the end; each run then costs "
                          "a half to two thirds less: docs/speed.md)")
    hunt_cmd.add_argument("--guided", action="store_true",
                          help="keep the schedules whose runs reached store lines no run "
                          "before had, and draw half the schedules by changing one fault of "
                          "one of them (not yet the default: it did not reach more lines "
                          "than blind draws in 40-60 schedules, docs/speed.md)")

    mutate_cmd = commands.add_parser(
        "mutate", parents=[plugins],
        help="measure the lab's own power: generated mutants of the scenario's store "
        "kind, each probed and hunted against the unmutated kind")
    mutate_cmd.add_argument("scenario", type=Path, nargs="?",
                            help="a scenario TOML file (none with --resume)")
    mutate_cmd.add_argument("--operators", default=None, metavar="CLASS,...",
                            help="mutation operator classes (default: all): "
                            "relational, arithmetic, constant, call_removed (Lua and "
                            "Python); ttl, index, loop_bound, early_return (Lua); "
                            "condition_negated, exception_swallowed (Python)")
    mutate_cmd.add_argument("--code", default="lua,python", metavar="lua,python",
                            help="what to mutate: the kind's Lua scripts, its own Python "
                            "classes, or both (default)")
    mutate_cmd.add_argument("--schedules", type=int, default=50, metavar="N",
                            help="schedules each mutant's hunt may try (default 50)")
    mutate_cmd.add_argument("--budget", default="2m",
                            help="wall-time cap per mutant, search and shrinking (default 2m)")
    mutate_cmd.add_argument("--faults", default="all",
                            help="fault kinds the hunts draw, comma-separated (default: all, "
                            "every kind the scenario can take; see hunt --faults)")
    mutate_cmd.add_argument("--no-swarm", dest="swarm", action="store_false",
                            help="draw each schedule's faults from every --faults kind, not "
                            "from a random subset per schedule (swarm testing, the default)")
    mutate_cmd.add_argument("--max-faults", type=int, default=3)
    mutate_cmd.add_argument("--seed", type=int, default=1, help="the hunts' seed")
    mutate_cmd.add_argument("--workers", type=int, default=1, metavar="N",
                            help="local processes, each judging whole mutants (the table is "
                            "the same with any number)")
    mutate_cmd.add_argument("--scheduler", metavar="ADDRESS",
                            help="judge each hunt's schedules on a Dask cluster instead")
    mutate_cmd.add_argument("--out", type=Path,
                            help="where the journal, the table, the kill rates and the "
                            "mutants' plugin go (default: data/results/mutate/SCENARIO-NAME)")
    mutate_cmd.add_argument("--resume", type=Path, metavar="DIR",
                            help="go on with the campaign a kill or a stop interrupted, from "
                            "the journal in its directory DIR: its scenario and options, "
                            "judging only the mutants it lacks (--workers and --scheduler "
                            "may change)")

    sweep_cmd = commands.add_parser(
        "sweep", parents=[plugins, limits],
        help="run a scenario over a grid or random design of parameters x seeds")
    sweep_cmd.add_argument("sweep", type=Path, help="a sweep TOML file, data/sweeps/*.toml")
    sweep_cmd.add_argument("--out", type=Path,
                           help="results directory (default: data/results/sweeps/NAME); "
                           "runs already there are skipped")
    sweep_cmd.add_argument("--workers", type=int, help="local worker processes "
                           "(default: one per core)")
    sweep_cmd.add_argument("--scheduler", metavar="ADDRESS",
                           help="run on a Dask cluster, e.g. tcp://10.0.0.5:8786, instead of "
                           "local processes (its workers need the lab installed)")
    sweep_cmd.add_argument("--seeds", type=int, help="seeds per point (1..N), instead of "
                           "the file's")
    sweep_cmd.add_argument("--set", dest="overrides", type=_override, action="append",
                           default=[], metavar="PATH=VALUE",
                           help="override a scenario field at every point, e.g. --set "
                           "duration=2s (repeatable; added to the file's [set])")
    sweep_cmd.add_argument("--allow-remote", "--allow-remote-redis", dest="allow_remote_redis",
                           action="store_true",
                           help="allow a Redis or PostgreSQL server that is not on loopback")
    sweep_cmd.add_argument("--quiet", action="store_true", help="no progress bar")

    bench_cmd = commands.add_parser(
        "bench", help="measure the lab's speed against Redis, fakeredis and SimPy, side by side")
    bench_cmd.add_argument("--backend", default="auto",
                           help="the real server to measure: auto (start a throwaway "
                           "redis-server if installed, else a Valkey of the lab's engine), "
                           "redis://HOST:PORT/DB, or fakeredis (skip real servers)")
    bench_cmd.add_argument("--quick", action="store_true",
                           help="small workloads, under a minute: a smoke test")
    bench_cmd.add_argument("--rediscovery", metavar="FAMILY,...", nargs="?", const="",
                           help="instead of speed, the lab's power: hunt every historical "
                           "variant of each family (or of those named) from the family's "
                           "plain scenario, as data/rediscovery/FAMILY.toml plans it, and "
                           "print found/total, schedules and wall time per variant")
    bench_cmd.add_argument("--power", metavar="FAMILY,...", nargs="?", const="",
                           help="instead of speed, the lab's power as mutation campaigns "
                           "measure it: each family's campaigns (data/power/FAMILY.toml), "
                           "lines reached, mutants not reached, kill rate and blame against "
                           "their targets; a campaign already begun goes on from its journal")
    bench_cmd.add_argument("--workers", type=int, default=1, metavar="N",
                           help="with --rediscovery: processes judging each hunt's schedules; "
                           "with --power: processes judging mutants")
    bench_cmd.add_argument("--out", type=Path, metavar="DIR",
                           help="with --rediscovery: where its journal goes, each variant's "
                           "result as it is found (default: data/results/rediscovery/FAMILIES); "
                           "with --power: where the campaigns go (default: data/results/power)")
    bench_cmd.add_argument("--resume", type=Path, metavar="DIR",
                           help="go on with the rediscovery a kill or a stop interrupted, from "
                           "the journal in DIR, hunting only the variants it lacks")

    check_cmd = commands.add_parser(
        "check", parents=[plugins, limits],
        help="validate a scenario, its plugins and its [expect] metric names without running it")
    check_cmd.add_argument("scenario", type=Path, help="a scenario TOML file")
    check_cmd.add_argument("--set", dest="overrides", type=_override, action="append",
                           default=[], metavar="PATH=VALUE",
                           help="override a scenario field, as run takes it (repeatable)")
    check_cmd.add_argument("--backend", help="the backend run would be given (default: the "
                           "scenario's, else the store's own)")

    diff_cmd = commands.add_parser(
        "diff", help="compare two runs' summaries metric by metric: those that differ")
    diff_cmd.add_argument("run_a", type=Path, metavar="RUN_A",
                          help="a run's results directory, or its summary.json")
    diff_cmd.add_argument("run_b", type=Path, metavar="RUN_B", help="the other run")

    fields_cmd = commands.add_parser(
        "fields", parents=[plugins],
        help="print every scenario field with its default, and the summary's keys")
    fields_cmd.add_argument("--metrics", type=Path, metavar="SCENARIO",
                            help="print only the summary keys a run of SCENARIO reports, "
                            "its family's included")
    commands.add_parser("stores", parents=[plugins],
                        help="list the store kinds a scenario can name")

    clean_cmd = commands.add_parser(
        "clean", help="remove what killed runs left: on a server (keys, library, schema the "
        "lab marked) and in the temp directory")
    clean_cmd.add_argument("--backend", help="redis://HOST:PORT/DB or postgresql://...: the "
                           "server to clean (default: only the temp directory)")
    clean_cmd.add_argument("--older-than", type=_duration, metavar="AGE",
                           help="also remove runs started at least AGE ago (e.g. 1h), "
                           "whether or not their process can be seen to be gone")
    clean_cmd.add_argument("--dry-run", action="store_true",
                           help="list what would go, remove nothing")
    clean_cmd.add_argument("--allow-remote", action="store_true",
                           help="clean a server that is not on loopback")
    return parser


def main(argv: list[str] | None = None) -> int:
    from stores import registry
    args = build_parser().parse_args(argv)
    try:
        registry.load_plugins(getattr(args, "plugins", []))
    except registry.PluginError as error:
        print(f"error: --plugin: {error}", file=sys.stderr)
        return USER_ERROR
    if args.command == "clean":
        return _exit_code_of(lambda: _clean(args), "clean")
    if args.command == "fields":
        return _exit_code_of(lambda: _fields(args), "fields")
    if args.command == "stores":
        kinds = sorted(registry.kinds().items())
        # As wide as the longest name, so a plugin's long name keeps the column.
        width = max(len(name) for name, _ in kinds)
        for name, kind in kinds:
            print(f"{name:{width}}  {kind.summary} [backends: {', '.join(kind.backends)}]")
        return 0
    if args.command == "replay":
        return _exit_code_of(lambda: _replay(args), "replay")
    if args.command == "hunt":
        return _exit_code_of(lambda: _hunt(args), "hunt")
    if args.command == "check":
        return _exit_code_of(lambda: _check(args), "check")
    if args.command == "diff":
        return _exit_code_of(lambda: _diff(args), "diff")
    if args.command == "sweep":
        return _exit_code_of(lambda: _sweep(args), "sweep")
    if args.command == "bench":
        return _exit_code_of(lambda: _bench(args), "bench")
    if args.command == "mutate":
        return _exit_code_of(lambda: _mutate(args), "mutate")
    return _exit_code_of(lambda: _run(args), "run")


def _exit_code_of(action: Callable[[], int], command: str = "") -> int:
    """Run a command, turning the lab's errors into messages and exit codes,
    and Ctrl-C or SIGTERM into one line (after the same cleanup as any end)."""
    from simulator.backends import BackendError
    from simulator.engine.kernel import SimulationError
    from simulator.run.stopping import signal_name, stopped_exit, terminate_as_interrupt
    from simulator.scenario.model import ScenarioError
    try:
        with terminate_as_interrupt():
            return action()
    except KeyboardInterrupt as stop:
        notes = "".join(f"; {note}" for note in getattr(stop, "__notes__", ()))
        print(f"{command} stopped by {signal_name(stop)}{notes}", file=sys.stderr)
        return stopped_exit(stop)
    except (ScenarioError, ValueError, BackendError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return USER_ERROR
    except SimulationError as error:
        print(f"simulation failed: {error}", file=sys.stderr)
        return SIMULATION_FAILED
    except OSError as error:
        # A path the user gave that cannot be read or written as asked.
        where = f": {error.filename}" if error.filename else ""
        print(f"error: {error.strerror or error}{where}", file=sys.stderr)
        return USER_ERROR
    except MemoryError:
        # The process's own ceiling (ulimit -v, a container) came before the
        # run's memory guard could stop it: still one line, never a traceback.
        print("error: out of memory before the run reached its memory limit (this process "
              "may have less: ulimit -v, a container); make the scenario smaller, or set "
              "--max-memory to what the process may have", file=sys.stderr)
        return USER_ERROR


def _examined(scenario: Scenario, args: argparse.Namespace) -> Examined:
    """What ``check`` finds, one line a problem, each naming the file as the
    scenario's own refusals do, and the work estimated."""
    from simulator.run import preflight
    examined = preflight.examine(scenario, args.backend)
    return replace(examined, problems=[f"{args.scenario}: {problem}"
                                       for problem in examined.problems])


def _output_directory(path: Path | None, option: str = "--out") -> None:
    """An output directory that is an existing file is refused before anything runs."""
    if path is not None and path.exists() and not path.is_dir():
        raise ValueError(f"{option}: {path} is a file; give a directory for the results")


def _output_file(path: Path | None, option: str) -> None:
    """An output file that is an existing directory is refused before anything runs."""
    if path is not None and path.is_dir():
        raise ValueError(f"{option}: {path} is a directory; give a file")


def _fault_kinds(text: str) -> tuple[str, ...]:
    from simulator.search.strategies import ALL_FAULTS, EVERY_KIND
    kinds = tuple(kind.strip() for kind in text.split(",") if kind.strip())
    if kinds == EVERY_KIND:
        return kinds
    unknown = set(kinds) - set(ALL_FAULTS)
    if unknown or not kinds:
        raise ValueError(f"--faults: expected all, or some of {', '.join(ALL_FAULTS)}, "
                         f"got {text!r}")
    return kinds


def _mutate(args: argparse.Namespace) -> int:
    from simulator.mutate.campaign import CODE, OPERATORS, Options, run_campaign
    from simulator.mutate.table import summary_line, write_tables
    from simulator.scenario.model import load_scenario
    if args.workers < 1:
        raise ValueError(f"--workers: at least 1, got {args.workers}")
    if args.resume is not None:
        return _mutate_resumed(args)
    if args.scenario is None:
        raise ValueError("mutate: give a scenario TOML file, or --resume DIR to go on with "
                         "an interrupted campaign")
    operators = OPERATORS
    if args.operators is not None:
        operators = tuple(name.strip() for name in args.operators.split(",") if name.strip())
        unknown = sorted(set(operators) - set(OPERATORS))
        if unknown or not operators:
            raise ValueError(f"--operators: expected some of {', '.join(OPERATORS)}, "
                             f"got {args.operators!r}")
    code = tuple(name.strip() for name in args.code.split(",") if name.strip())
    if not code or set(code) - set(CODE):
        raise ValueError(f"--code: expected lua, python or both, got {args.code!r}")
    if args.schedules < 0:
        raise ValueError(f"--schedules: at least 0, got {args.schedules}")
    if not 1 <= args.max_faults <= 10:
        raise ValueError(f"--max-faults: from 1 to 10, got {args.max_faults}")
    _output_directory(args.out)
    name = load_scenario(args.scenario).name
    out = args.out or Path("data") / "results" / "mutate" / name
    options = Options(operators=operators, code=code, schedules=args.schedules,
                      seconds=parse_duration_us(args.budget) / 1e6,
                      faults=_fault_kinds(args.faults), swarm=args.swarm,
                      max_faults=args.max_faults, seed=args.seed, workers=args.workers,
                      scheduler=args.scheduler)
    rows = run_campaign(args.scenario, options, out,
                        echo=lambda line: print(line, flush=True))
    written = write_tables(rows, out)
    print(summary_line(rows))
    print(f"written: {', '.join(str(path) for path in written)}")
    return 0


MUTATE_JOB_OPTIONS = ("scenario", "operators", "code", "schedules", "budget", "faults",
                      "swarm", "max_faults", "seed", "out")
"""What ``mutate --resume`` takes from the campaign's journal, not the command line."""


def _mutate_resumed(args: argparse.Namespace) -> int:
    """``mutate --resume DIR``: the interrupted campaign, to its end."""
    from simulator.mutate.campaign import COMMAND, Options, run_campaign
    from simulator.mutate.table import summary_line, write_tables
    from simulator.sweeps.journal import Journal
    defaults = vars(build_parser().parse_args(["mutate"]))
    given = [f"--{name.replace('_', '-')}" if name != "scenario" else "a scenario"
             for name in MUTATE_JOB_OPTIONS if getattr(args, name) != defaults[name]]
    if given:
        raise ValueError(f"--resume: the campaign's scenario and options are its journal's; "
                         f"give only --workers or --scheduler with it, not {', '.join(given)}")
    job = Journal.resume(args.resume, COMMAND).job
    options = Options.of(job["options"], workers=args.workers, scheduler=args.scheduler)
    rows = run_campaign(Path(job["scenario"]), options, args.resume,
                        echo=lambda line: print(line, flush=True), resume=True)
    written = write_tables(rows, args.resume)
    print(summary_line(rows))
    print(f"written: {', '.join(str(path) for path in written)}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from simulator.bench import run_bench
    from simulator.run.compose import quiet_store_logs
    if args.power is not None:
        from simulator.mutate.power import run_power
        if args.rediscovery is not None or args.resume is not None:
            raise ValueError("--power: one measurement at a time (not with --rediscovery "
                             "or --resume; a --power run goes on from its journals by itself)")
        if args.workers < 1:
            raise ValueError(f"--workers: at least 1, got {args.workers}")
        _output_directory(args.out)
        with quiet_store_logs():
            run_power([name.strip() for name in args.power.split(",") if name.strip()],
                      args.workers, args.out, echo=lambda line: print(line, flush=True))
        return 0
    if args.rediscovery is not None or args.resume is not None:
        from simulator.bench.rediscovery import run_rediscovery
        if args.workers < 1:
            raise ValueError(f"--workers: at least 1, got {args.workers}")
        if args.resume is not None and (args.rediscovery or args.out):
            raise ValueError("--resume: the rediscovery's families and directory are its "
                             "journal's; give only --workers with it")
        families = [name.strip() for name in (args.rediscovery or "").split(",")
                    if name.strip()]
        _output_directory(args.out)
        results = run_rediscovery(families, args.workers,
                                  echo=lambda line: print(line, flush=True),
                                  out_dir=args.resume or args.out,
                                  resume=args.resume is not None)
        return 0 if all(result.found for result in results) else SIMULATION_FAILED
    if args.out is not None:
        raise ValueError("--out: only with --rediscovery (the speed lines are printed)")
    with quiet_store_logs():
        run_bench(args.backend, args.quick, echo=lambda line: print(line, flush=True))
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from simulator.run import preflight
    from simulator.run.limits import refuse_workers_beyond, run_limits
    from simulator.scenario.model import ScenarioError
    from simulator.sweeps import SweepInterrupted, load_sweep, run_sweep
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers: at least 1, got {args.workers}")
    if args.seeds is not None and args.seeds < 1:
        raise ValueError(f"--seeds: at least 1, got {args.seeds}")
    sweep = load_sweep(args.sweep, seeds=args.seeds,
                       set_fields=dict(args.overrides) | _limit_overrides(args),
                       plugins=args.plugins)
    largest = None  # the point whose run takes the most memory, and its scenario
    for point in sweep.points:  # every point within its limits before any run
        scenario = sweep.scenario_at(point)
        problems = preflight.over_limits(scenario, sweep.backend)
        if problems:
            raise ScenarioError(f"{args.sweep}: the point {point.parameters}: {problems[0]}")
        run_bytes = preflight.work(scenario, sweep.backend).memory_bytes
        if largest is None or run_bytes > largest[0]:
            largest = (run_bytes, scenario)
    if largest is not None and args.scheduler is None:
        # Local workers each hold a run: together they must fit the memory limit.
        refuse_workers_beyond(args.workers or os.cpu_count() or 1, largest[0],
                              run_limits(largest[1].limits))
    out = args.out or Path("data/results/sweeps") / sweep.name
    print(f"sweep {sweep.name}: {len(sweep.points)} point(s) x {len(sweep.seeds)} seed(s), "
          f"varying {', '.join(sweep.parameters)}", file=sys.stderr)
    try:
        outcome = run_sweep(sweep, out, workers=args.workers, scheduler=args.scheduler,
                            progress=not args.quiet, allow_remote_redis=args.allow_remote_redis)
    except SweepInterrupted as stop:
        print(stop, file=sys.stderr)
        return 128 + stop.signum  # as a shell reports a process ended by that signal
    print(f"{outcome.runs_total} run(s): {outcome.completed} run now, "
          f"{outcome.already_done} already done, {len(outcome.failed)} failed")
    for run_id, error in sorted(outcome.failed.items()):
        print(f"run {run_id} failed: {error}", file=sys.stderr)
    print(f"results: {out / 'results.parquet'} (one row per run; "
          "simulator.sweeps.read_results reads it)")
    if sweep.coverage:
        print(_sweep_reach(out / "results.parquet"))
    return 0 if outcome.ok else SIMULATION_FAILED


def _sweep_reach(results: Path) -> str:
    """The union of the reach of a sweep's runs, as its results hold them."""
    import pandas as pd

    from simulator.reach.lines import REACH, Reach, union_of
    runs = pd.read_parquet(results, columns=[REACH])[REACH].dropna()
    return (f"over the sweep's {len(runs)} run(s), "
            f"{union_of(map(Reach.decode, runs)).account()}")


def _hunt(args: argparse.Namespace) -> int:
    from simulator.run import preflight
    from simulator.run.compose import quiet_store_logs
    from simulator.scenario.conditions import parse_condition
    from simulator.scenario.model import set_dotted
    from simulator.scenario.stand_in import reference_kind
    from simulator.search.hunt import NOTE, Hunt, PhaseSummary
    _output_file(args.out, "--out")
    if args.invariant is None and args.reference is None:
        raise ValueError("hunt: give --invariant EXPR, --reference KIND, or both")
    try:
        invariant = None if args.invariant is None else parse_condition(args.invariant)
    except ValueError as error:
        raise ValueError(f"--invariant: {error}") from None
    budget_s = parse_duration_us(args.budget) / 1e6

    def echo(line: str) -> None:
        # One write, its newline in it: a stop signal landing between the
        # text and a separate newline ran the stop's own line onto this one.
        sys.stderr.write(f"{line}\n")
        sys.stderr.flush()

    def each_run(phase: str, runs: int, line: str) -> None:
        echo(f"hunt: {line}" if phase == NOTE else f"hunt: {phase} run {runs}: {line}")

    phases = PhaseSummary(echo)
    hunt = Hunt(args.scenario, invariant, seed=args.seed, examples=args.examples,
                time_budget_s=budget_s, max_faults=args.max_faults,
                kinds=_fault_kinds(args.faults), swarm=args.swarm, target=args.target,
                reference=args.reference,
                progress=each_run if args.verbose else phases, workers=args.workers,
                scheduler=args.scheduler, plugins=args.plugins,
                overrides=dict(args.overrides) | _backend_override(args),
                coverage=args.coverage, guided=args.guided)
    for path, value in _limit_overrides(args).items():
        set_dotted(hunt.data, path, value)  # every run of the hunt has them
    if hunt.reference is not None:
        echo(f"hunt: the reference {reference_kind(hunt.reference)} stands in for "
             f"{hunt.swapped}")
    try:
        with quiet_store_logs():
            found = hunt.search()
    except preflight.UnknownMetric as error:
        raise ValueError(f"--invariant: {error}") from None
    if not args.verbose:
        echo(f"hunt: {hunt.runs} run(s): {phases.totals()}")
    if hunt.discarded_runs:
        echo(f"hunt: {hunt.discarded_runs} run(s) of batches after the one that broke, "
             "dropped (not counted)")
    if hunt.reach is not None:
        print(f"over the hunt's {hunt.runs} run(s), {hunt.reach.account()}")
    if hunt.corpus is not None:
        print(f"corpus: {len(hunt.corpus.entries)} schedule(s) reached lines no run before "
              "them had; later draws changed one fault of one of them")
    if found is None:
        print(f"no schedule broke it in {hunt.runs} run(s) (broken when {hunt.question})")
        return SIMULATION_FAILED
    print(f"broken with {len(found.schedule)} fault(s) after {found.runs} run(s): "
          f"{found.verdict}")
    for fault in found.schedule:
        print(f"  {fault}")
    if args.out is not None:
        hunt.write_report(found, args.out)
        print(f"race report: {args.out} (replay it with: {lab_command('replay', args.out)})")
    return 0


def _report_file(path: Path | None) -> None:
    """``--report``: refused before anything runs when it names a directory."""
    if path is not None and path.is_dir():
        raise ValueError(f"--report: {path} is a directory; give a file, e.g. "
                         f"{path / 'report.html'}")


def _replay(args: argparse.Namespace) -> int:
    from simulator.present.html_report import write_replay_report
    from simulator.present.timeline import draw_timeline
    from simulator.scenario.model import parse_scenario
    from simulator.search.race_report import RaceReport
    from simulator.search.races import involved_events, replay, timeline_sampling
    _report_file(args.html)
    report = RaceReport.load(args.report)
    against_fixed = args.against == "fixed"
    # Drawn or told: sampled per key (which never changes the trace).
    sampling = timeline_sampling(report) if args.plot or args.trace or args.html else None
    found = replay(report, against_fixed=against_fixed, backend=args.backend,
                   sample_every=sampling)
    if args.plot:
        changes = report.fixed if against_fixed else report.variant
        settings = parse_scenario(report.scenario_for(changes)).settings
        draw_timeline(found.result, args.plot, report.schedule, settings=settings,
                      title=report.title)
        print(f"timeline: {args.plot}")
    if args.html:
        page = write_replay_report(args.html, report, found, backend=args.backend,
                                   sample_every=sampling)
        print(f"report: {page}")
    print(f"{report.title}")
    if args.trace:
        story = involved_events(found.result, report, start_us=args.trace_from,
                                before=args.trace_before, limit=args.trace_limit)
        for line in story:
            print(f"  {line}")
        if story and (story[0].startswith("... (") or story[-1].startswith("... (")):
            print("  (--trace-from TIME or --trace-before N widens the window; "
                  "--trace-limit 0 shows every event)")
    if args.against:
        print(found.headline)
        return SIMULATION_FAILED if found.reproduced else 0
    if args.record:
        found.result.trace.write_parquet(report.recorded_trace)
        print(f"recorded {report.recorded_trace}; fingerprint = "
              f"\"{found.result.summary['trace_fingerprint']}\"")
    elif found.divergence is not None:
        print(f"trace differs from the recorded one: {found.divergence}")
    elif report.fingerprint is not None:
        print("trace fingerprint matches the report")
    print(found.headline)
    return 0 if found.reproduced else SIMULATION_FAILED


def _run(args: argparse.Namespace) -> int:
    from simulator.families import invariants_for
    from simulator.present.html_report import write_report
    from simulator.present.junit import write_junit
    from simulator.present.report import summary_table
    from simulator.present.verdicts import (
        VERDICT_FAILED,
        expectation_line,
        failing_verdicts,
        inconclusive_line,
        invariant_verdicts,
    )
    from simulator.reach.lines import reach_account
    from simulator.run.compose import run_scenario
    from simulator.run.exercise import INCONCLUSIVE_EXIT
    from simulator.run.results import json_writer, probe, write_results
    from simulator.run.summary import INCONCLUSIVE
    from simulator.scenario.conditions import failures_of, judge_expectations
    from simulator.scenario.model import ScenarioError, load_scenario
    from simulator.search.counterfactual import counterfactual, counterfactual_table
    _report_file(args.html)
    _output_directory(args.out)
    per_key = {"metrics.per_key": True} if args.html else {}  # the report's record panel
    scenario = load_scenario(args.scenario,
                             dict(args.overrides) | per_key | _limit_overrides(args))
    # What check finds is refused before the run, not reported after it.
    examined = _examined(scenario, args)
    if examined.problems:
        raise ScenarioError("\n".join(examined.problems))
    if args.junit is not None and args.junit.is_dir():
        raise ValueError(f"--junit: {args.junit} is a directory; give a file, e.g. "
                         f"{args.junit / 'junit.xml'}")
    reference_scenario = _reference_scenario(args, scenario)
    seed = scenario.seed if args.seed is None else args.seed
    out = args.out or default_results(scenario, seed, dict(args.overrides))
    _refuse_another_run(out, scenario, args.force)
    # An unwritable or full results directory is refused now, not after the run.
    probe(out, round(examined.estimate.kernel_events) if examined.estimate else 0)
    with tqdm(total=100, unit="%", desc=f"{scenario.name} (virtual time)",
              disable=True if args.quiet else None, leave=False, file=sys.stderr) as bar:
        def progress(done_us: int, total_us: int) -> None:
            bar.n = round(100 * done_us / total_us)
            bar.refresh()

        result = run_scenario(scenario, seed=seed, backend=args.backend,
                              allow_remote_redis=args.allow_remote_redis, progress=progress,
                              estimate=examined.estimate, coverage=args.coverage)
    writers = result.writers()
    # The verdicts first: whether each invariant held, in one line each,
    # after why none can be trusted when the run could not judge the store.
    inconclusive = inconclusive_line(result.summary)
    if inconclusive is not None:
        print(inconclusive)
        if args.verbose:
            for name in ("store_raised_traceback", "first_boot_failure_traceback"):
                if name in result.run_info:
                    print(result.run_info[name].rstrip())
                    break
    verdicts = invariant_verdicts(result.summary, invariants_for(scenario.kind))
    for verdict in verdicts:
        print(verdict)
    print(("\n" if verdicts else "") + summary_table(result.summary, result.run_info))
    if args.coverage:
        print(f"\n{reach_account(result.summary)}")
    if reference_scenario is not None:
        writers["reference.json"] = json_writer(
            _against_reference(args, reference_scenario, seed, result.summary))
    if args.counterfactual:
        found = counterfactual(scenario, seed=seed, backend=args.backend,
                               allow_remote_redis=args.allow_remote_redis,
                               baseline=result.summary,
                               progress=lambda line: print(line, file=sys.stderr, flush=True))
        writers["counterfactual.json"] = json_writer(found.as_dict())
        print(f"\n{counterfactual_table(found)}")
    expectations = judge_expectations(scenario.expect, result.summary)
    if expectations:
        print()
    for expectation in expectations:
        print(expectation_line(expectation))
    if args.junit is not None:
        write_junit(args.junit, f"{scenario.name}-seed{seed}", verdicts, expectations,
                    result.summary.get(INCONCLUSIVE))
    written = ", ".join(str(path) for path in sorted(write_results(out, writers)))
    print(f"\nresults: {written}")
    if args.junit is not None:
        print(f"junit: {args.junit}")
    if args.html is not None:
        print(f"report: {write_report(args.html, result, scenario)}")
    failures = failures_of(expectations, result.summary)
    for failure in failures:
        print(f"expectation failed: {failure}", file=sys.stderr)
    if inconclusive is not None:
        print(f"{inconclusive} (seed {seed})", file=sys.stderr)
        return INCONCLUSIVE_EXIT
    if failures:
        return EXPECTATION_FAILED
    failed = failing_verdicts(verdicts, result.summary, args.fail_on)
    for verdict in failed:
        print(f"verdict failed (--fail-on {args.fail_on}): {verdict.measured}", file=sys.stderr)
    return VERDICT_FAILED if failed else 0


def default_results(scenario: Scenario, seed: int, overrides: dict[str, Any]) -> Path:
    """``data/results/NAME-seedN``; with the store set on the command line,
    ``NAME-STORE-seedN``, so a run of another store keeps its own."""
    store = f"-{scenario.store}" if "store" in overrides else ""
    return Path("data/results") / f"{scenario.name}{store}-seed{seed}"


def _refuse_another_run(out: Path, scenario: Scenario, force: bool) -> None:
    """Results of another scenario or store in ``out`` are not overwritten
    without ``--force``: a run's results are never lost by accident."""
    try:
        before = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(before, dict):
        return
    theirs = (before.get("scenario"), before.get("store"))
    if force or theirs == (scenario.name, scenario.store):
        return
    raise ValueError(f"{out} holds the results of {theirs[0]} on {theirs[1]}, not of "
                     f"{scenario.name} on {scenario.store}: give another --out, or --force "
                     "to write over them")


def _reference_scenario(args: argparse.Namespace, scenario: Scenario) -> Scenario | None:
    """``run --reference KIND``: the scenario on the reference store, checked
    before anything runs (its family, its settings, its backend)."""
    if args.reference is None:
        return None
    from simulator.families import refuse_other_family
    from simulator.run.compose import resolve_backend
    from simulator.scenario.model import load_scenario, read_toml, set_dotted
    from simulator.scenario.stand_in import placed, reference_kind, stand_in
    from stores import registry
    try:
        refuse_other_family(scenario.kind, registry.get(reference_kind(args.reference)))
        data = read_toml(args.scenario)
        for path, value in args.overrides:
            set_dotted(data, path, value)
        places = stand_in(placed(args.reference, data))
    except ValueError as error:
        raise ValueError(f"--reference: {error}") from None
    reference = load_scenario(args.scenario, dict(args.overrides) | _limit_overrides(args)
                              | places)
    resolve_backend(reference, args.backend)
    return reference


def _against_reference(args: argparse.Namespace, reference_scenario: Scenario, seed: int,
                       summary: dict) -> dict:
    """``run --reference KIND``: the reference store's run beside this one;
    returns the reference's summary (``reference.json``)."""
    from simulator.families import invariants_for
    from simulator.present.against_reference import compare, comparison_lines
    from simulator.run.compose import run_scenario
    reference = run_scenario(reference_scenario, seed=seed, backend=args.backend,
                             allow_remote_redis=args.allow_remote_redis).summary
    scenario = reference_scenario
    comparisons = compare(summary, reference, invariants_for(scenario.kind))
    print("\n" + "\n".join(comparison_lines(args.reference, comparisons)))
    return reference


def _check(args: argparse.Namespace) -> int:
    """``check``: the scenario validated, its plugins imported and its
    ``[expect]`` names known, without running it; one line either way."""
    from simulator.families import family_of
    from simulator.run import preflight
    from simulator.scenario.model import load_scenario
    scenario = load_scenario(args.scenario, dict(args.overrides) | _limit_overrides(args))
    examined = _examined(scenario, args)
    for problem in examined.problems:
        print(f"error: {problem}", file=sys.stderr)
    if examined.problems:
        return USER_ERROR
    from simulator.run.compose import boot_check
    from simulator.run.exercise import INCONCLUSIVE_EXIT
    refusal = boot_check(scenario, args.backend)
    if refusal is not None:
        print(f"error: {args.scenario}: a run would be INCONCLUSIVE: no replica could boot "
              f"its store ({scenario.store}): {refusal}", file=sys.stderr)
        return INCONCLUSIVE_EXIT
    plugins = [*args.plugins, *scenario.plugins]
    entries = len(scenario.expect)
    expect = (f"{entries} [expect] entr{'y' if entries == 1 else 'ies'}, every metric known"
              if entries else "no [expect] entries")
    print(f"ok: {args.scenario}: store {scenario.store} (family "
          f"{family_of(scenario.kind).name}), {expect}"
          + (f", plugins {', '.join(dict.fromkeys(plugins))}" if plugins else ""))
    print(preflight.work_line(scenario, args.backend, examined.estimate))
    return 0


def _fields(args: argparse.Namespace) -> int:
    """``fields``: the scenario fields and the summary's keys; ``--metrics``:
    a scenario's summary keys."""
    from simulator.present.report import fields_reference, metrics_reference
    if args.metrics is None:
        print(f"{fields_reference()}\n\n{metrics_reference()}")
        return 0
    from simulator.run.preflight import known_metrics
    from simulator.scenario.model import load_scenario
    scenario = load_scenario(args.metrics)
    print(metrics_reference(known_metrics(scenario), scenario.store))
    return 0


def _clean(args: argparse.Namespace) -> int:
    """``clean``: what killed runs left, found by the lab's marks, listed and removed."""
    from simulator.backends import BackendSpec, require_loopback, run_marks
    older_than_s = None if args.older_than is None else args.older_than / 1e6
    lines = []
    if args.backend is not None:
        spec = BackendSpec.parse(args.backend)
        if spec.url is None:
            raise ValueError(f"--backend: clean needs a server's URL, got {args.backend!r} "
                             "(an embedded or throwaway backend leaves nothing on a server)")
        require_loopback(spec.url, args.allow_remote, "removes what the lab's runs left there")
        lines += (_clean_redis(spec.url, older_than_s, args.dry_run) if spec.family == "redis"
                  else _clean_postgres(spec.url, older_than_s, args.dry_run))
    lines += run_marks.temp_leftovers(args.dry_run)
    for line in lines:
        print(line)
    if not lines:
        print("nothing of the lab's left" + (f" on {args.backend}" if args.backend else "")
              + " or in the temp directory")
    return 0


def _clean_redis(url: str, older_than_s: float | None, dry_run: bool) -> list[str]:
    import redis

    from simulator.backends import BackendError, run_marks
    client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=30)
    try:
        return run_marks.redis_leftovers(client, older_than_s, dry_run,
                                         shim_signature=run_marks.SHIM_SIGNATURE)
    except (redis.exceptions.ConnectionError, OSError) as error:
        raise BackendError(f"cannot reach {url}: {error}") from None
    finally:
        client.close()


def _clean_postgres(url: str, older_than_s: float | None, dry_run: bool) -> list[str]:
    import asyncio

    import asyncpg

    from simulator.backends import BackendError, run_marks

    async def clean() -> list[str]:
        connection = await asyncpg.connect(url)
        try:
            return await run_marks.schema_leftovers(connection, older_than_s, dry_run)
        finally:
            await connection.close()
    try:
        return asyncio.run(clean())
    except (OSError, asyncpg.PostgresError) as error:
        raise BackendError(f"cannot clean {url}: {type(error).__name__}: {error}") from None


def _diff(args: argparse.Namespace) -> int:
    from simulator.present.diff import diff_table, read_summary
    a, b = read_summary(args.run_a), read_summary(args.run_b)
    print(diff_table(str(args.run_a), str(args.run_b), a, b))
    return 0

"""The lab's own property test: no scenario file, however malformed, crashes,
hangs or exhausts the lab.

Hypothesis draws malformed scenarios — each a committed scenario
(``data/scenarios/**/*.toml``) with one change, or bytes in its place — and
hands each to the real command line, as a user would:

* ``check`` in-process, for most (about 4 ms each), under a wall-clock alarm
  and an address-space limit, so a hang or a memory blow-up fails the
  example instead of the machine;
* ``run`` in a subprocess for a sample, on the small committed scenarios,
  with a timeout and an address-space limit of its own.

The changes are those a user's file has: a leaf replaced by NaN, infinities,
1e308, negative, zero or huge numbers, booleans, text, empty tables or lists;
a duration, rate or distribution written with a malformed or extreme number
(``lognormal(1ms, nan)``, ``poisson(1e308/s)``, ``zipf(.)``, ``1e308s``); a
field set that the file leaves at its default; a key deleted; an unknown key
added; a fault scheduled on a replica past the fleet; an ``[expect]`` entry
naming no metric; huge counts (``workload.keys.subjects = 1000000000``); and
garbage: random bytes, a file cut short, bytes that are not UTF-8, arrays
nested hundreds deep.

What is acceptable, for each:

* exit 2 (the input was wrong): stderr is one line per problem, each naming
  the file and then, for a file that is a TOML table, the field path; when
  the changed field's own domain refuses the value, that is the only line;
  never a traceback;
* exit 0, when the change happens to leave a valid scenario: ``check`` says
  ``ok``; a ``run`` finishes within the time and memory bound;
* for ``run``, exit 3 only when every line says an ``[expect]`` threshold
  failed (a valid scenario whose traffic changed may break its own
  thresholds);
* never exit 1 ("simulation failed" blames the run for its input) and never
  any other code.

The suite runs ``CHECK_EXAMPLES`` checks and ``RUN_EXAMPLES`` runs, derandomized
(the same examples every time, well under a minute). A longer, randomized
search is one command: ``make fuzz-scenarios`` (``LAB_FUZZ_EXAMPLES=N`` sets
the number of checks; runs are a twentieth of it). Every input it has found
mishandled is pinned in ``FOUND`` below.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import tomllib
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from simulator.cli import USER_ERROR, main
from simulator.run.limits import default_max_memory
from simulator.scenario.domains import field_path
from simulator.scenario.model import Scenario, parse_scenario
from stores import registry

REPO = Path(__file__).resolve().parents[2]
SCENARIO_DIR = REPO / "data" / "scenarios"
COMMITTED: dict[str, dict[str, Any]] = {
    str(path.relative_to(SCENARIO_DIR)): tomllib.loads(path.read_text(encoding="utf-8"))
    for path in sorted(SCENARIO_DIR.glob("**/*.toml"))
}
"""Every committed scenario, read once: the bases the changes are made to."""

LONG_RUN = "LAB_FUZZ_EXAMPLES" in os.environ
CHECK_EXAMPLES = int(os.environ.get("LAB_FUZZ_EXAMPLES", "250"))
RUN_EXAMPLES = max(8, CHECK_EXAMPLES // 20)

CHECK_SECONDS = 10
"""A check reads and validates a file and estimates its work: milliseconds."""
RUN_SECONDS = 90
"""A run within ``RUN_MAX_EVENTS``, or its refusal: seconds, a minute at most on a
loaded machine."""
RUN_MAX_EVENTS = "200000"
"""The lab's own event limit, lowered to a test's size (``--max-events``): a run
estimated past it must be refused before it starts, one that gets there
stopped, each with exit 2. Its memory limit is the lab's default, half of the
address space the run is given (``RUN_MEMORY``)."""
EXTRA_MEMORY = 1 << 30
"""What one check may add to the test process's address space."""
CHECK_LIMITS = ("--max-memory", f"{default_max_memory()}B")
"""The lab's default memory limit, as it is outside the check's address-space
limit (the default is half of it, under one)."""
RUN_MEMORY = 4 << 30
"""The address space a run's process may have (``ulimit -v``): a small
scenario's run stays under 1.5 GiB of it, most of that reserved, not used, by
the libraries."""

KeyPath = tuple[str | int, ...]


# ------------------------------------------------------------------ the changes


@dataclass(frozen=True)
class Malformed:
    """One committed scenario with one change, or bytes in its place.

    ``change`` is ``set`` (``value`` at ``path``, creating tables on the way),
    ``delete`` (the key at ``path``) or ``bytes`` (``value`` is the file)."""

    base: str
    change: str
    path: KeyPath = ()
    value: Any = None

    def content(self) -> bytes:
        if self.change == "bytes":
            return self.value
        document = copy.deepcopy(COMMITTED[self.base])
        if self.change == "delete":
            *parents, leaf = self.path
            node = document
            for part in parents:
                node = node[part]
            del node[leaf]
        else:
            _set(document, self.path, self.value)
        return to_toml(document).encode()

    @property
    def one_problem(self) -> bool:
        """Whether the change can make one problem only: one value, not a
        table or a list of them, in a table the file has (a table it lacks
        may lack required fields too)."""
        if self.change == "bytes" or isinstance(self.value, dict | list):
            return False
        try:
            parent = _at(COMMITTED[self.base], self.path[:-1])
        except (KeyError, IndexError, TypeError):
            return False
        return isinstance(parent, dict)

    @property
    def field(self) -> str:
        """The changed field's path, as the lab's messages write it."""
        return field_path(self.path)


def _set(document: dict[str, Any], path: KeyPath, value: Any) -> None:
    """Set ``value`` at ``path``, making a table (a list, where the path goes on
    with an index) wherever the path goes through nothing, or through a value
    of another shape."""
    node: Any = document
    *parents, leaf = path
    for part, after in zip(parents, path[1:], strict=True):
        child = node[part] if _holds(node, part) else None
        shape = list if isinstance(after, int) else dict
        if not isinstance(child, shape):
            child = shape()
            _put(node, part, child)
        node = child
    _put(node, leaf, value)


def _holds(node: Any, part: str | int) -> bool:
    if isinstance(node, list):
        return isinstance(part, int) and part < len(node)
    return part in node


def _put(node: Any, part: str | int, value: Any) -> None:
    if isinstance(node, list) and not _holds(node, part):
        node.append(value)
    else:
        node[part] = value


def to_toml(document: dict[str, Any]) -> str:
    """A document as TOML: one ``key = value`` line per top-level key, tables
    inline (tomllib reads, but does not write)."""
    return "".join(f"{_string(key)} = {_value(value)}\n" for key, value in document.items())


def _string(text: str) -> str:
    # JSON's escapes are TOML's, but for DEL, which TOML wants escaped too.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)  # inf, -inf and 1e+308 are TOML
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    return "{" + ", ".join(f"{_string(k)} = {_value(v)}" for k, v in value.items()) + "}"


# ------------------------------------------------------------- where and what


def leaves(node: Any, path: KeyPath = ()) -> Iterator[KeyPath]:
    """Every value's path in a document, tables and lists included."""
    items = node.items() if isinstance(node, dict) else (
        enumerate(node) if isinstance(node, list) else ())
    for key, child in items:
        yield path + (key,)
        yield from leaves(child, path + (key,))


def model_paths(model: type[BaseModel], path: KeyPath = ()) -> Iterator[KeyPath]:
    """Every field a scenario may set, as written in TOML (a list of tables
    at index 0), whether or not a committed file sets it."""
    for name, field in model.model_fields.items():
        here = path + (field.alias or name,)
        yield here
        candidates = [field.annotation, *typing.get_args(field.annotation)]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)
                  and not getattr(c, "written_as_text", False)]
        if nested:
            index = (0,) if typing.get_origin(field.annotation) is list else ()
            yield from model_paths(nested[0], here + index)


KNOWN_FIELDS: tuple[KeyPath, ...] = tuple(dict.fromkeys([
    *model_paths(Scenario),
    *(("store_settings", field.alias or name)
      for kind in registry.shipped().values()
      for name, field in kind.settings_model.model_fields.items()),
]))

EXTREME_NUMBERS = [
    math.nan, math.inf, -math.inf, 1e308, -1e308, 1e-308, -0.0, 0.5, -1, 0, 1,
    2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, -(10**30),
]
NOT_NUMBERS = [True, False, "", " ", "500", "nan", "inf", "text", "2\n0", "\u0000", "\u2028",
               "\U0001f600", "9" * 4000, {}, [], [1, 2], ["no_such_plugin_module"], {"x": 1},
               [{}], {"rep\nlicas": 1}]
MALFORMED_TEXT = [
    "1e308s", "1e309s", "-5s", "0s", "nan s", "infs", "1e308/s", "1e309/s", "nan/s", "-1/s",
    "0/s", "1/0s", "5/", "ms", "10y", "99999999999999999999d",
    "poisson(1e308/s)", "poisson(nan/s)", "poisson(1e9/s)", "poisson(1e6/s) per replica",
    "bursts(1e308/s, on=1s, off=0s)", "bursts(5/s, on=0s, off=0s)",
    "lognormal(1ms, nan)", "lognormal(40ms, inf)", "lognormal(1e308s, 0.5)",
    "lognormal(-1ms, 0.5)", "pareto(2s, 0)", "pareto(2s, 1e308)", "normal(0ms, -1ms)",
    "uniform(5, 1)", "uniform(0, 1e308)", "uniform(nan, 1)", "exponential(0s)",
    "exponential(1e308s)", "zipf(.)", "zipf(400)", "zipf(nan)", "zipf(-1)", "zipf()",
    "lognormal(", "lognormal(1ms)", "lognormal(1ms, 0.5, 3)", "weibull(1ms, 2)",
    "empirical(/nonexistent/durations.csv)", "empirical(data/scenarios/demo.toml)",
    "empirical(/dev/null)", "<= nan", "== inf", "<=", "no_such_metric <= 1",
]
"""Texts where durations, rates, distributions and conditions belong."""

HUGE_COUNTS: list[tuple[KeyPath, Any]] = [
    (("workload", "keys", "subjects"), 1_000_000_000),
    (("workload", "keys", "subjects"), 2**53),
    (("workload", "keys", "namespaces"), 1_000_000_000),
    (("fleet", "replicas"), 100_000),
    (("fleet", "replicas"), 1_000_000),
    (("workload", "arrivals"), "poisson(1e308/s)"),
    (("workload", "arrivals"), "poisson(1000000/s)"),
    (("workload", "arrivals"), "poisson(1000/s) per replica"),
    (("duration",), "3650d"),
    (("drain",), "3650d"),
    (("network", "retries", "count"), 10**9),
    (("server", "maxmemory_keys"), 2**63),
    (("faults", "crash"), {"rate": "1e308/s"}),
    (("faults", "crash"), {"rate": "1000000/s", "restart_after": "0s"}),
    (("faults", "slow_reply"), {"rate": "1/us"}),
    (("faults", "schedule"), [{"at": "0s", "fault": "lose_reply", "replica": 0,
                               "count": 10**9}]),
    (("metrics", "sample_every"), "1us"),
    (("workload", "sessions"), {"lifetime": "3650d", "call_every": "exponential(1us)",
                                "counters": {"calls": {"limit": 10**9}}}),
]
"""Values each inside its field's domain that ask for years of work or the
machine's memory: the work estimate must refuse them before anything runs."""

NUMBER_IN_TEXT = re.compile(r"\d+(\.\d+)?")


@st.composite
def changed_texts(draw: st.DrawFn, text: str) -> str:
    """A text with one of its numbers written another way: ``lognormal(40ms,
    0.5)`` -> ``lognormal(40ms, nan)``."""
    numbers = list(NUMBER_IN_TEXT.finditer(text))
    if not numbers:
        return draw(st.sampled_from(MALFORMED_TEXT))
    number = draw(st.sampled_from(numbers))
    written = draw(st.sampled_from(["nan", "inf", "-inf", "1e308", "1e309", "-1", "0", ".",
                                    "", "99999999999999999999999", "1e-320", "0x10"]))
    return text[:number.start()] + written + text[number.end():]


BASES = sorted(COMMITTED)


@st.composite
def leaf_changes(draw: st.DrawFn, base: str) -> Malformed:
    """A value of the file replaced by an extreme number, a non-number, or text."""
    document = COMMITTED[base]
    path = draw(st.sampled_from(list(leaves(document))))
    current = _at(document, path)
    if isinstance(current, str):
        value = draw(st.one_of(changed_texts(current), st.sampled_from(MALFORMED_TEXT),
                               st.sampled_from(EXTREME_NUMBERS + NOT_NUMBERS)))
    else:
        value = draw(st.sampled_from(EXTREME_NUMBERS + NOT_NUMBERS + MALFORMED_TEXT))
    return Malformed(base, "set", path, value)


def _at(document: Any, path: KeyPath) -> Any:
    for part in path:
        document = document[part]
    return document


@st.composite
def field_settings(draw: st.DrawFn, base: str) -> Malformed:
    """Any field the lab knows, set to an extreme value, even one the file
    leaves at its default (a fault that never fires included)."""
    path = draw(st.sampled_from(KNOWN_FIELDS))
    value = draw(st.sampled_from(EXTREME_NUMBERS + NOT_NUMBERS + MALFORMED_TEXT))
    return Malformed(base, "set", path, value)


@st.composite
def deletions(draw: st.DrawFn, base: str) -> Malformed:
    path = draw(st.sampled_from([p for p in leaves(COMMITTED[base])
                                 if not isinstance(p[-1], int)]))
    return Malformed(base, "delete", path)


@st.composite
def unknown_keys(draw: st.DrawFn, base: str) -> Malformed:
    """A key no model has, beside the keys of a table of the file (a misspelling)."""
    document = COMMITTED[base]
    tables = [()] + [p for p in leaves(document) if isinstance(_at(document, p), dict)]
    table = draw(st.sampled_from(tables))
    keys = [key for key in _at(document, table)] or ["field"]
    name = draw(st.sampled_from([f"{key}s" for key in keys] + [
        "frobnicate", "Replicas", "rep\nlicas", "a.b", "", " ", "\U0001f600", "\x85"]))
    return Malformed(base, "set", table + (name,), draw(st.sampled_from([1, "1s", {}])))


@st.composite
def faults_past_the_fleet(draw: st.DrawFn, base: str) -> Malformed:
    replicas = COMMITTED[base].get("fleet", {}).get("replicas", 100)
    replicas = replicas if isinstance(replicas, int) else 100
    replica = draw(st.sampled_from([replicas, replicas + 1, 99_999, 100_000, 2**63, -1]))
    fault = draw(st.sampled_from([
        {"at": "0s", "fault": "crash", "replica": replica},
        {"at": "0s", "fault": "lose_reply", "replica": replica},
        {"at": "0s", "fault": "partition", "replicas": [0, replica], "duration": "1s"},
    ]))
    schedule = [*COMMITTED[base].get("faults", {}).get("schedule", []), fault]
    return Malformed(base, "set", ("faults", "schedule"), schedule)


@st.composite
def unknown_metrics(draw: st.DrawFn, base: str) -> Malformed:
    name = draw(st.sampled_from(["cap_overshot_max_ratio", "no_such_metric", "holds_leaked",
                                 "books", "cap\novershoot", "a.b", ""]))
    condition = draw(st.sampled_from([
        "cap_overshot_max_ratio <= 0.01", "<= 0.01", "no_such_metric == 0",
        "conservation_drift_microdollars_total == 0 and holds_leekd == 0", "<= nan",
        "== inf", "<", "cap_overshoot_max_ratio <=", "1 <= 2", "(", "", "holds\nleaked <= 1",
        "<= 1", "== 0"]))
    return Malformed(base, "set", ("expect", name), condition)


@st.composite
def huge_counts(draw: st.DrawFn, base: str) -> Malformed:
    path, value = draw(st.sampled_from(HUGE_COUNTS))
    return Malformed(base, "set", path, value)


@st.composite
def garbage(draw: st.DrawFn, base: str) -> Malformed:
    """Bytes: random ones, the file cut short or with bytes inserted, not UTF-8,
    or with arrays or inline tables nested deep."""
    text = (SCENARIO_DIR / base).read_bytes()
    at = draw(st.integers(0, len(text)))
    content = draw(st.one_of(
        st.binary(max_size=400),
        st.just(text[:at]),
        st.binary(min_size=1, max_size=40).map(lambda noise: text[:at] + noise + text[at:]),
        st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80"]).map(
            lambda bad: text[:at] + bad + text[at:]),
        st.just(b"\xef\xbb\xbf" + text),  # a BOM, as some editors write
        st.tuples(st.integers(1, 2000), st.sampled_from([(b"[", b"]"), (b"{a = ", b"}")])).map(
            lambda nest: b"%s\n[nested]\nx = %s1%s\n" % (
                text, nest[1][0] * nest[0], nest[1][1] * nest[0])),
    ))
    return Malformed(base, "bytes", value=content)


CHANGES = (leaf_changes, field_settings, deletions, unknown_keys, faults_past_the_fleet,
           unknown_metrics, huge_counts, garbage)


def malformed(bases: list[str]) -> st.SearchStrategy[Malformed]:
    return st.sampled_from(bases).flatmap(
        lambda base: st.one_of(*(change(base) for change in CHANGES)))


def _small(base: str) -> bool:
    """A committed scenario whose own run takes a couple of seconds."""
    scenario = parse_scenario(COMMITTED[base])
    return scenario.end_us <= 5_000_000 and scenario.fleet.replicas <= 20 and (
        not scenario.workload.sessions)


SMALL_BASES = [base for base in BASES if _small(base)]


# ------------------------------------------------------------- the judgement

FIELD_PATH = re.compile(r'([^\s"\\]+|"([^"\\]|\\.)*")(\.([^\s"\\]+|"([^"\\]|\\.)*"))*: ')
"""A field's path as the lab writes it: keys bare, or quoted when they hold a
space, a quote or a character that does not print."""


STOPPED = re.compile(r"run stopped at t=.*\(limits\.max_(events|memory)\)")
"""The guard's line when a run reaches a limit its estimate did not foresee:
it names the limit's field, the time and the seed (``simulator.run.limits``)."""


class TookTooLong(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in the
    code under test swallows it."""


@contextlib.contextmanager
def bounded(seconds: int, extra_memory: int) -> Iterator[None]:
    """Stop the code inside after ``seconds`` of wall time, and let it grow the
    address space by ``extra_memory`` at most (a MemoryError past it)."""
    def alarm(signum: int, frame: Any) -> None:
        raise TookTooLong(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = _address_space() + extra_memory
    resource.setrlimit(resource.RLIMIT_AS, (
        ceiling if soft == resource.RLIM_INFINITY else min(ceiling, soft), hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def check(case: Malformed, directory: Path) -> tuple[int, str, str, Path]:
    """``python -m simulator check FILE`` in-process: exit code, stdout, stderr."""
    path = directory / "scenario.toml"
    path.write_bytes(case.content())
    out, err = io.StringIO(), io.StringIO()
    with bounded(CHECK_SECONDS, EXTRA_MEMORY), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(["check", str(path), *CHECK_LIMITS])
    return code, out.getvalue(), err.getvalue(), path


def _limit_run_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (RUN_MEMORY, RUN_MEMORY))


def run(case: Malformed, directory: Path,
        limits: tuple[str, ...] = ("--max-events", RUN_MAX_EVENTS)) -> tuple[int, str, str, Path]:
    """``python -m simulator run FILE`` in a process of its own, under a
    timeout and an address-space limit."""
    path = directory / "scenario.toml"
    path.write_bytes(case.content())
    command = [sys.executable, "-m", "simulator", "run", str(path), "--quiet",
               "--out", str(directory / "results"), "--fail-on", "never", *limits]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=_limit_run_memory, start_new_session=True)
    try:
        out, err = process.communicate(timeout=RUN_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{case}: still running after {RUN_SECONDS} s")
    return process.returncode, out, err, path


def problem_lines(err: str) -> list[str]:
    """The lines a terminal shows (only a newline starts one)."""
    return [line.removeprefix("error: ") for line in err.split("\n") if line.strip()]


def assert_answered(case: Malformed, code: int, out: str, err: str, path: Path) -> None:
    """The outcomes a malformed scenario may have (the module docstring)."""
    said = f"exit {code}\nstdout:\n{out[-2000:]}\nstderr:\n{err[-4000:]}"
    assert "Traceback" not in err + out, said
    assert "\r" not in err, said
    lines = problem_lines(err)
    if code == 0:
        assert not any(line.startswith(str(path)) for line in lines), said
        return
    if code == 3:
        assert lines and all(line.startswith("expectation failed: ") for line in lines), said
        return
    assert code == USER_ERROR, said
    assert lines, said
    if len(lines) == 1 and STOPPED.match(lines[0]):
        return  # the run's guard stopped it, naming the limit it reached
    assert len(set(lines)) == len(lines), f"a problem said twice\n{said}"
    for line in lines:
        assert line.startswith(f"{path}: "), f"a line not naming the file\n{said}"
    if case.change != "bytes":
        for line in lines:
            problem = line.removeprefix(f"{path}: ")
            assert FIELD_PATH.match(problem), f"a line naming no field\n{said}"
    if case.one_problem and any(
            _names(line.removeprefix(f"{path}: "), case.field) for line in lines):
        # The changed field's own domain refused it: nothing else is wrong.
        assert len(lines) == 1, f"more than the changed field's line\n{said}"


def _names(problem: str, field: str) -> bool:
    return problem.startswith(f"{field}: ") or problem.startswith(f"{field}.")


# ------------------------------------------------------------------ the tests

PROFILE = settings(
    deadline=None, derandomize=not LONG_RUN, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(PROFILE, max_examples=CHECK_EXAMPLES)
@given(case=malformed(BASES))
def test_check_answers_any_malformed_scenario_in_one_line_per_problem(case):
    with tempfile.TemporaryDirectory() as directory:
        assert_answered(case, *check(case, Path(directory)))


@settings(PROFILE, max_examples=RUN_EXAMPLES)
@given(case=malformed(SMALL_BASES))
def test_run_answers_any_malformed_scenario_within_its_time_and_memory(case):
    with tempfile.TemporaryDirectory() as directory:
        assert_answered(case, *run(case, Path(directory)))


HOT = "exactness-hot-namespace.toml"
NESTED = (SCENARIO_DIR / HOT).read_bytes() + b"\n[nested]\nx = " + b"[" * 600 + b"]" * 600
FOUND = [
    # Issue 17's own examples, each once mishandled (a traceback, a hang, a
    # MemoryError, exit 1 or 3, or a line naming no field).
    (Malformed(HOT, "set", ("network", "timeout"), "1e308s"), "network.timeout"),
    (Malformed(HOT, "set", ("network", "latency"), "lognormal(1e308s, 0.5)"),
     "network.latency"),
    (Malformed(HOT, "set", ("faults", "crash"), {"rate": "1e309/s"}), "faults.crash.rate"),
    (Malformed(HOT, "set", ("faults", "pause"), {"rate": "1e308/s"}), "faults.pause.rate"),
    (Malformed(HOT, "set", ("workload", "arrivals"), "poisson(1e308/s)"), "workload.arrivals"),
    (Malformed(HOT, "set", ("workload", "keys", "subjects"), 1_000_000_000),
     "workload.keys.subjects"),
    (Malformed(HOT, "set", ("network", "latency"), "lognormal(1ms, nan)"), "network.latency"),
    (Malformed(HOT, "set", ("network", "latency"), "lognormal(40ms, inf)"), "network.latency"),
    (Malformed(HOT, "set", ("fleet", "clock_drift_ppm"), math.nan), "fleet.clock_drift_ppm"),
    (Malformed(HOT, "set", ("workload", "estimate_microdollars"), math.nan),
     "workload.estimate_microdollars"),
    (Malformed(HOT, "set", ("workload", "estimate_microdollars"), 1e308),
     "workload.estimate_microdollars"),
    (Malformed(HOT, "set", ("faults", "pause"), {"rate": "1/h", "duration": "lognormal(2s, nan)"}),
     "faults.pause.duration"),
    (Malformed(HOT, "set", ("workload", "keys", "skew"), "zipf(400)"), "workload.keys.skew"),
    (Malformed(HOT, "set", ("workload", "keys", "skew"), "zipf(.)"), "workload.keys.skew"),
    (Malformed(HOT, "set", ("faults", "schedule"),
               [{"at": "1s", "fault": "crash", "replica": 99999}]), "faults.schedule.0.replica"),
    (Malformed(HOT, "set", ("fleet", "replicas"), True), "fleet.replicas"),
    (Malformed(HOT, "set", ("fleet", "replicas"), "500"), "fleet.replicas"),
    (Malformed(HOT, "set", ("expect", "cap_overshot_max_ratio"), "<= 0.01"),
     "expect.cap_overshot_max_ratio"),
    (Malformed(HOT, "bytes", value=(SCENARIO_DIR / HOT).read_bytes().replace(
        b"hot namespace", b"hot \xffnamespace")), ""),
    # Found by this test: what check finds beyond the fields' own domains (an
    # [expect] metric, the work estimate, the backend, a table the store
    # needs) named no file.
    (Malformed("av-state-variant-add-without-ttl.toml", "set", ("faults", "crash"),
               {"rate": "1000000/s", "restart_after": "0s"}), "faults.crash.rate"),
    (Malformed(HOT, "set", ("duration",), "3650d"), "workload.arrivals"),
    (Malformed("hunt/leases-trusts-misaligned-reply-quiet.toml", "set", ("backend",),
               "\U0001f600"), "backend"),
    (Malformed("hunt/av-state-refund-many-tonumber-quiet.toml", "delete",
               ("workload", "sessions")), "workload.sessions"),
    # Found by this test: arrays or inline tables nested hundreds deep were a
    # RecursionError traceback (tomllib recurses).
    (Malformed(HOT, "bytes", value=NESTED), ""),
    # Found by this test: a key holding a line break split its problem's line
    # in two (written raw, or split at \x85 by the lab's own line splitting).
    (Malformed(HOT, "set", ("fleet", "rep\nlicas"), 3), 'fleet."rep\\nlicas"'),
    (Malformed(HOT, "set", ("store_settings", "a\u2028b"), 1), 'store_settings."a\\u2028b"'),
    (Malformed(HOT, "set", ("expect", "cap\novershoot"), "<= 1"), 'expect."cap\\novershoot"'),
    (Malformed("mutants/in-memory-eviction.toml", "set", ("workload", "arrivals", "\x85"), 1),
     "workload.arrivals"),
    # Found by this test: a limit flag (--max-memory) set into a file whose
    # limits is no table was a TypeError traceback.
    (Malformed(HOT, "set", ("limits",), math.nan), "limits"),
]
"""Every input found mishandled, and the field its one line must name (none:
the file alone). The issue's examples are through its scenario, as it gave
them with --set."""

HUNG_OR_EXHAUSTED = [FOUND[2][0], FOUND[4][0], FOUND[5][0]]
"""The issue's inputs that hung a run or exhausted its memory."""

SAMPLED_EVERY_MICROSECOND = Malformed("hunt/leases-trusts-misaligned-reply-quiet.toml", "set",
                                      ("metrics", "sample_every"), "1us")
"""Found by this test: within the default limits (4.9 GiB estimated, of 8 GiB),
so a run under ``ulimit -v`` 4 GiB started, and died of a MemoryError traceback
writing its 5 million samples."""


@pytest.mark.parametrize(("case", "field"), FOUND,
                         ids=lambda value: value if isinstance(value, str) else value.base)
def test_each_input_found_mishandled_is_refused_in_one_line_naming_its_field(case, field,
                                                                             tmp_path):
    code, out, err, path = check(case, tmp_path)
    assert_answered(case, code, out, err, path)
    lines = problem_lines(err)
    assert code == USER_ERROR and len(lines) == 1, err
    problem = lines[0].removeprefix(f"{path}: ")
    assert _names(problem, field) if field else not FIELD_PATH.match(problem), err


@pytest.mark.parametrize("case", HUNG_OR_EXHAUSTED, ids=lambda case: case.field)
def test_the_inputs_that_hung_or_exhausted_a_run_are_refused_before_it_starts(case, tmp_path):
    code, out, err, path = run(case, tmp_path)
    assert_answered(case, code, out, err, path)
    assert code == USER_ERROR and not (tmp_path / "results").exists(), err


def test_a_run_under_an_address_space_limit_is_refused_within_it(tmp_path):
    # The default memory limit is half of what the process may have, ulimit -v
    # included: refused before it starts, naming the field and the limit.
    code, out, err, path = run(SAMPLED_EVERY_MICROSECOND, tmp_path, limits=())
    assert_answered(SAMPLED_EVERY_MICROSECOND, code, out, err, path)
    assert code == USER_ERROR, err
    assert err.startswith(f"error: {path}: metrics.sample_every: the run would take about ")
    assert "limits.max_memory" in err


@pytest.mark.parametrize("base", BASES)
def test_every_committed_scenario_written_back_as_toml_still_checks(base, tmp_path):
    # The changes are written with to_toml: it must not change a scenario's meaning.
    code, out, err, _ = check(Malformed(base, "set", ("name",), COMMITTED[base]["name"]),
                              tmp_path)
    assert (code, err) == (0, ""), err
    assert out.startswith("ok: ")


def test_the_small_scenarios_the_runs_start_from_exist():
    assert len(SMALL_BASES) >= 5, SMALL_BASES


@pytest.mark.parametrize(("overrides", "said"), [
    (["--set", "network=5", "--set", "network.timeout=1s"],
     "network: expected a table, to set network.timeout in it, got 5"),
    (["--set", "fleet.replicas.x=1"],
     "fleet.replicas: expected a table, to set fleet.replicas.x in it, got 20"),
    (["--set", "faults.schedule=[]", "--set", "faults.schedule.0.at=1s"],
     "faults.schedule.0: expected an index but the list is empty, to set faults.schedule.0.at"),
])
def test_a_set_through_what_is_no_table_is_one_line_naming_the_field(overrides, said,
                                                                     capsys):
    # Found by this test (a limit flag into `limits = nan`): these were a
    # TypeError or an IndexError traceback.
    path = SCENARIO_DIR / HOT
    assert main(["check", str(path), *overrides]) == USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: {said}") and len(err.splitlines()) == 1, err


def test_running_out_of_memory_is_one_line_not_a_traceback(monkeypatch, capsys):
    # Under ulimit -v, or in a container, an allocation may fail before the
    # run's memory guard could stop it.
    def exhausted(*args: Any, **kwargs: Any) -> None:
        raise MemoryError

    monkeypatch.setattr("simulator.scenario.model.load_scenario", exhausted)
    assert main(["check", str(SCENARIO_DIR / HOT)]) == USER_ERROR
    err = capsys.readouterr().err
    assert err.startswith("error: out of memory") and len(err.splitlines()) == 1, err

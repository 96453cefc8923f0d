"""Probing a mutant: direct calls against fakeredis, beside the unmutated store.

The calls are the scenario's own: the scripts its fault-free run sent to the
server, in order, with their keys and arguments (``run_scenario``'s
``record_scripts``). A probe replays them on two fresh embedded servers, one
running the base kind's scripts and one the mutant's, and compares every
reply and, at the end, every key (its type, its value, its TTL). The
servers' clock stands still while they replay (a probe is not a run: nothing
may expire, and wall time must not make two replays differ), and a TTL
longer than the scenario's run is compared as just that: a 24-hour TTL
moved by a second, or halved, changes nothing a run of hours can see. What
it finds:

* ``stillborn`` -- the mutant's script does not compile;
* ``not run`` -- the mutated line never ran on these calls: the same calls on
  the base scripts with that line made to stop the script never stop it
  (and, where they do, the kind running the scenario with that marker never
  hits it: another kind may send the same script, a migration's target);
* ``equivalent`` -- the line ran, yet every reply and every key came out the
  same, TTLs up to the run's length (an equivalent mutant, or one these
  calls cannot tell apart);
* ``differs`` -- a reply or a key differs: worth judging.

A line that cannot be made to stop (it continues an expression: the probe's
marker would not compile there) is taken as run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

import fakeredis
import redis

# Lua 5.1, as Redis runs (and fakeredis: a second Lua in one process crashes it).
from lupa.lua51 import LuaRuntime, LuaSyntaxError

from simulator.mutate.lua import Mutation
from simulator.reach.replay import key_value
from stores import registry
from stores.registry import StoreKind

Call = tuple[str, tuple[str, ...], tuple[str, ...]]
"""A recorded script call: ``(body, keys, args)``."""
STOP = "lab-probe: line reached"
"""The error the coverage marker raises where it is put."""
BLOCK_WORDS = ("end", "else", "elseif", "until", "then", "do")
"""Words a line may start with that end or continue a block, not begin a statement."""
STILL_CLOCK_S = 1_700_000_000.0
"""The instant the probe's servers read throughout a replay (seconds since the epoch)."""
BEYOND_THE_RUN = "outlives the run"
"""A key's TTL, as the probe compares it, when it is longer than the run."""


@dataclass(frozen=True)
class Probed:
    """What a probe found (``outcome``), and where the mutant first differed."""

    outcome: str
    detail: str = ""

    @property
    def judged(self) -> bool:
        """Worth a scenario run and a hunt: it differs from the base."""
        return self.outcome == "differs"


class Prober:
    """Probes mutants of ``base`` on the calls ``scenario``'s fault-free run sends."""

    def __init__(self, base: StoreKind, scenario: Any) -> None:
        from simulator.run.compose import run_scenario

        self.base = base
        self.scenario = scenario
        self.calls: list[Call] = []
        self.script_errors = run_scenario(scenario, record_scripts=self.calls
                                          ).summary.get("script_errors", 0)
        self._ran_in_a_run: dict[tuple[str, int], bool] = {}
        self.horizon_ms = scenario.end_us // 1000
        self.originals = {base.scripts.source(name): name for name in base.scripts}
        self.base_replies, self.base_keys = self._replay({})

    def _replay(self, swaps: dict[str, str], until: str | None = None
                ) -> tuple[list[Any], dict[str, Any]]:
        return _replay(self.calls, swaps, self.horizon_ms, until)

    def probe(self, mutation: Mutation, mutant_scripts: Any) -> Probed:
        """Probe the mutant: ``base`` running ``mutant_scripts``."""
        base, calls = self.base, self.calls
        mutated = {name: mutant_scripts.source(name) for name in base.scripts
                   if mutant_scripts.source(name) != base.scripts.source(name)}
        if not _compiles(mutated.values()):
            return Probed("stillborn", _compile_error(mutated.values()))
        if not any(self.originals.get(body) in mutated for body, _, _ in calls):
            return Probed("not run", f"no call ran {', '.join(sorted(mutated))}")
        if not self._line_runs(mutation):
            return Probed("not run", f"{mutation.script}:{mutation.line} never ran")
        replies, keys = self._replay({base.scripts.source(name): text
                                      for name, text in mutated.items()})
        for number, (mine, theirs) in enumerate(zip(replies, self.base_replies, strict=True)):
            if mine != theirs:
                name = self.originals.get(calls[number][0], "a command")
                return Probed("differs", f"call {number + 1} ({name}): {_short(mine)} where "
                                         f"the base had {_short(theirs)}")
        for key in sorted(set(self.base_keys) | set(keys)):
            if self.base_keys.get(key) != keys.get(key):
                return Probed("differs", f"key {key!r}: {_short(keys.get(key))} where the "
                                         f"base has {_short(self.base_keys.get(key))}")
        return Probed("equivalent", f"{len(calls)} call(s), the same replies and keys "
                                    f"(TTLs up to the run's {self.horizon_ms / 1000:,.0f} s)")

    def _line_runs(self, mutation: Mutation) -> bool:
        """Whether the mutated line runs on the calls: the base scripts with a
        marker that stops the script at the line's start; true when the
        marker cannot go there."""
        base = self.base
        text = base.scripts[mutation.script]
        start = text.rfind("\n", 0, mutation.offset) + 1
        words = text[start:].split(None, 1)
        if not words or words[0] in BLOCK_WORDS:
            return True  # a marker before it would belong to the block it closes
        marked = base.scripts.replacing(**{
            mutation.script: f"{text[:start]}error('{STOP}') {text[start:]}"})
        swaps = {base.scripts.source(name): marked.source(name) for name in base.scripts
                 if marked.source(name) != base.scripts.source(name)}
        if not _compiles(swaps.values()):
            return True
        replies, _ = self._replay(swaps, until=STOP)
        if not any(isinstance(reply, str) and STOP in reply for reply, _ in replies):
            return False
        return self._runs_in_a_run(mutation.script, start, marked)

    def _runs_in_a_run(self, script: str, start: int, marked: Any) -> bool:
        """Whether the line at ``start`` of ``script`` runs when the kind
        itself runs the scenario: the replay tells scripts apart by their
        text, so it counts a call another kind made with the same script (a
        migration's target running the same migration scripts) as the base
        kind's. One run of the scenario with the marked kind, per line."""
        from simulator.run.compose import quiet_store_logs, run_scenario

        key = (script, start)
        if key not in self._ran_in_a_run:
            name = f"{self.base.name}.probe.{script}.{start}"
            if name not in registry.kinds():
                assert self.base.with_scripts is not None
                registry.register(self.base.with_scripts(name, marked))
            try:
                with quiet_store_logs():
                    errors = run_scenario(self.scenario.model_copy(update={"store": name})
                                          ).summary.get("script_errors", 0)
            except Exception:  # noqa: BLE001 -- the marker stopped the store itself: it ran
                errors = self.script_errors + 1
            self._ran_in_a_run[key] = errors > self.script_errors
        return self._ran_in_a_run[key]


def _compiles(sources: Any) -> bool:
    return _compile_error(sources) == ""


def _compile_error(sources: Any) -> str:
    """The first of ``sources`` that does not compile, as its error; "" if
    none fails (Lua's own compiler, as ``SCRIPT LOAD`` on a real server)."""
    runtime = LuaRuntime()
    for source in sources:
        try:
            runtime.compile(source)
        except LuaSyntaxError as error:
            return str(error).splitlines()[0]
    return ""


def _server() -> redis.Redis:
    return fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)


@contextmanager
def _still_clock() -> Iterator[None]:
    """fakeredis reads the wall clock to stamp each command (and its TTLs):
    it reads one instant instead while the probe replays."""
    with mock.patch("time.time", return_value=STILL_CLOCK_S):
        yield


def _replay(calls: Sequence[Call], swaps: dict[str, str], horizon_ms: int,
            until: str | None = None) -> tuple[list[Any], dict[str, Any]]:
    """Every reply (an error as its message) and every key at the end, for
    ``calls`` run on a fresh server with the bodies in ``swaps`` replaced;
    ``until``: stop at the first error that says it. TTLs past
    ``horizon_ms`` compare equal."""
    server = _server()
    replies: list[Any] = []
    try:
        with _still_clock():
            for body, keys, args in calls:
                try:
                    reply = server.eval(swaps.get(body, body), len(keys), *keys, *args)
                except redis.ResponseError as error:
                    reply = str(error)
                # The reply, and the keys the call named as they are after it: a
                # value written wrong shows here even if a later call removes it.
                replies.append((reply, [_key_state(server, key, horizon_ms) for key in keys]))
                if until is not None and isinstance(reply, str) and until in reply:
                    break
            return replies, {key: _key_state(server, key, horizon_ms)
                             for key in server.scan_iter(count=1000)}
    finally:
        server.close()


def _key_state(server: redis.Redis, key: str, horizon_ms: int) -> tuple[str, Any, int | str]:
    """A key's type, value and TTL in ms (-1 none, -2 gone; ``BEYOND_THE_RUN``
    when longer than ``horizon_ms``)."""
    kind, value = key_value(server, key)
    ttl = server.pttl(key)
    return kind, value, BEYOND_THE_RUN if ttl > horizon_ms else ttl


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."

"""``hunt``: search fault schedules for one that breaks an invariant.

Hypothesis draws fault schedules (``simulator.strategies``) for a scenario,
runs each, and stops at the first run whose summary breaks the invariant;
then it shrinks the schedule (fewer faults, earlier, on lower replicas) while
the invariant stays broken, and the smallest one is written as a race report
that ``replay`` reproduces. Given the same seed, the same hunt finds the same
schedule. A time budget bounds the whole search, shrinking included: past it,
no new run is started and the best schedule found so far is kept.
"""

from __future__ import annotations

import copy
import os
import random
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from simulator.expectations import Expectation
from simulator.run import RunResult, run_scenario, script_names
from simulator.scenario import Scenario, parse_scenario
from simulator.strategies import REPLICA_FAULTS, fault_schedules
from stores import registry

VERBS = ("HDEL", "INCRBY", "DEL", "GET", "SET")
"""Plain commands a lost request or reply may target, beside the store's scripts."""


@dataclass(frozen=True)
class Found:
    schedule: list[dict[str, Any]]
    value: Any
    result: RunResult
    runs: int


class Hunt:
    """One search over one scenario."""

    def __init__(self, scenario_path: Path, invariant: Expectation, seed: int = 0,
                 examples: int = 100, time_budget_s: float = 600, max_faults: int = 4,
                 kinds: tuple[str, ...] = REPLICA_FAULTS, target: str = "any",
                 progress: Callable[[int, str], None] | None = None) -> None:
        self.scenario_path = scenario_path
        self.data = tomllib.loads(scenario_path.read_text(encoding="utf-8"))
        self.scenario: Scenario = parse_scenario(self.data, source=str(scenario_path))
        self.invariant = invariant
        self.seed = seed
        self.examples = examples
        self.deadline = time.monotonic() + time_budget_s
        self.max_faults = max_faults
        self.kinds = kinds
        self.target = target
        self.progress = progress
        self.runs = 0

    def _run(self, schedule: list[dict[str, Any]]) -> RunResult:
        data = copy.deepcopy(self.data)
        data.setdefault("faults", {})["schedule"] = schedule
        return run_scenario(parse_scenario(data), seed=self.scenario.seed)

    def _breaks(self, schedule: list[dict[str, Any]]) -> bool:
        if time.monotonic() > self.deadline:
            return False
        self.runs += 1
        value = self._run(schedule).summary.get(self.invariant.metric)
        broken = self.invariant.holds_for(value)
        if self.progress is not None:
            self.progress(self.runs, f"{len(schedule)} fault(s), {self.invariant.metric}="
                                     f"{value!r}{' BROKEN' if broken else ''}")
        return broken

    def search(self) -> Found | None:
        scenario = self.scenario
        calls = sorted(set(script_names(scenario).values())) + list(VERBS)
        if self.target == "migration" and not scenario.migrations:
            raise ValueError("--target migration: the scenario runs no migration")
        migration = bool(scenario.migrations) and self.target != "replicas"
        strategy = fault_schedules(scenario.fleet.replicas, scenario.duration_us, calls,
                                   kinds=self.kinds, migration=migration,
                                   max_faults=self.max_faults,
                                   only_migration=self.target == "migration")
        try:
            schedule = find(strategy, self._breaks, random=random.Random(self.seed),
                            settings=settings(max_examples=self.examples, database=None,
                                              deadline=None,
                                              phases=[Phase.generate, Phase.shrink],
                                              suppress_health_check=list(HealthCheck)))
        except NoSuchExample:
            return None
        result = self._run(schedule)
        return Found(schedule, result.summary.get(self.invariant.metric), result, self.runs)

    def write_report(self, found: Found, out: Path) -> None:
        """A race report of ``found`` (and its trace beside it) that ``replay`` reproduces."""
        out.parent.mkdir(parents=True, exist_ok=True)
        scenario_ref = os.path.relpath(self.scenario_path.resolve(), out.parent.resolve())
        variant = {"store": self.scenario.store}
        variant.update({f"migrations.{index}.to": step.to
                        for index, step in enumerate(self.scenario.migrations)})
        plugins = registry.plugins_for(variant.values())  # what replay must import
        title = f"Hunted: {self.invariant} broken by {len(found.schedule)} fault(s)"
        broken_when = f"{self.invariant.operator} {self.invariant.threshold:g}"
        lines = [
            f"title = {_toml(title)}",
            f"story = {_toml(_story(found.schedule, self.invariant, found.value))}",
            f"scenario = {_toml(scenario_ref)}",
            f"seed = {self.scenario.seed}",
            *([f"plugins = {_toml(list(plugins))}"] if plugins else []),
            f"fingerprint = {_toml(found.result.summary['trace_fingerprint'])}",
            "",
            "[variant]",
            *(f"{_toml(path)} = {_toml(kind)}" for path, kind in variant.items()),
            "",
            "[fixed]  # fill in the fixed store's changes to compare with --against fixed",
            "",
        ]
        for fault in found.schedule:
            lines.append("[[schedule]]")
            lines += [f"{key} = {_toml(value)}" for key, value in fault.items()]
            lines.append("")
        lines += ["[invariant]", f"metric = {_toml(self.invariant.metric)}",
                  f"broken_when = {_toml(broken_when)}"]
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        found.result.trace.write_parquet(out.with_suffix(".trace.parquet"))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def _story(schedule: list[dict[str, Any]], invariant: Expectation, value: Any) -> str:
    steps = []
    for fault in schedule:
        target = "the migration" if fault.get("migration") else f"replica {fault.get('replica')}"
        what = fault["fault"].replace("_", " ")
        call = f" of {fault['call']}" if fault.get("call") else ""
        steps.append(f"at {fault['at']}, {what}{call} on {target}")
    return (f"Found by hunt: {'; '.join(steps)}. Then {invariant.metric} = {value!r} "
            f"(broken when {invariant.operator} {invariant.threshold:g}).")

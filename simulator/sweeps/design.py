"""Sweep files: a base scenario, the parameters to vary, the seeds per point.

A sweep file is TOML::

    name = "overshoot-vs-faults"
    scenario = "../scenarios/demo.toml"    # relative to the sweep file
    seeds = 3                              # seeds 1, 2, 3 (or a list: [7, 8])
    design = "grid"                        # every combination; or "random"
    [set]                                  # the same override at every point
    "fleet.replicas" = 50
    [vary]                                 # one entry per scenario field
    "network.reply_loss" = [0.0, 0.01, 0.05]
    "store_settings.reservation_ttl" = { low = "1s", high = "1m", steps = 4, scale = "log" }

A parameter is a list of values, or a range ``{low, high}`` (numbers, or
durations such as ``"250ms"``) cut into ``steps`` values on a grid, or drawn
``samples`` times by a random design (seeded by ``design_seed``). Every point
is validated as a scenario before anything runs, so a bad value fails at once,
naming the parameter and the field.

Rules kept here: a point is identified by its parameter values alone (a hash
of them), so the same point in a re-run, or in an edited sweep that still
contains it, is recognised as done. Nothing here runs a simulation.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.util
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from simulator.scenario.base import Model
from simulator.scenario.model import (
    Scenario,
    ScenarioError,
    format_errors,
    parse_scenario,
    read_toml,
    set_dotted,
)
from stores import registry
from stores.quantities import MICROSECONDS_PER, parse_duration_us, parse_rate_per_second

Value = bool | int | float | str


class Range(Model):
    """A range of numbers or of durations."""

    low: float | str
    high: float | str
    steps: int | None = Field(None, ge=2, description="Values on a grid design (ends included).")
    scale: Literal["linear", "log"] = "linear"
    integer: bool = Field(False, description="Round every value to a whole number.")

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if isinstance(self.low, str) != isinstance(self.high, str):
            raise ValueError("low and high must both be numbers or both be durations")
        low, high = self.bounds
        if low > high:
            raise ValueError(f"low ({self.low!r}) is above high ({self.high!r})")
        if self.scale == "log" and low <= 0:
            raise ValueError("a log scale needs low > 0")
        return self

    @property
    def is_duration(self) -> bool:
        return isinstance(self.low, str)

    @property
    def bounds(self) -> tuple[float, float]:
        if self.is_duration:
            return float(parse_duration_us(self.low)), float(parse_duration_us(self.high))
        return float(self.low), float(self.high)

    def at(self, fraction: float) -> Value:
        """The value a fraction of the way from low to high, on this scale."""
        low, high = self.bounds
        if self.scale == "log":
            number = math.exp(math.log(low) + fraction * (math.log(high) - math.log(low)))
        else:
            number = low + fraction * (high - low)
        if self.is_duration:
            return duration_text(round(number))
        return round(number) if self.integer else round(number, 12)

    def grid(self) -> list[Value]:
        if self.steps is None:
            raise ValueError("a range on a grid design needs steps (how many values)")
        return [self.at(index / (self.steps - 1)) for index in range(self.steps)]


class SweepFile(Model):
    """The sweep file, validated."""

    name: str = Field(description="Names the sweep (and its default output directory).")
    scenario: str = Field(description="The base scenario, relative to the sweep file.")
    seeds: int | list[int] = Field(
        1, description="Seeds per point: a count (seeds 1..N) or an explicit list.")
    design: Literal["grid", "random"] = "grid"
    samples: int | None = Field(None, ge=1, description="Points drawn by a random design.")
    design_seed: int = Field(0, description="Seeds a random design's draws.")
    backend: str | None = Field(None, description="memory | valkey | fakeredis | "
                                "redis://HOST:PORT/DB (default: the store's; a Redis store's "
                                "is the lab's Valkey engine)")
    set: dict[str, Any] = Field(default_factory=dict,
                                description="Overrides applied at every point.")
    vary: dict[str, Any] = Field(description="The parameters to vary, by field path.")
    coverage: bool = Field(False, description="Each run records which store lines it "
                           "reached (as run --coverage); the sweep prints their union.")

    @model_validator(mode="after")
    def _consistent(self) -> SweepFile:
        if isinstance(self.seeds, int) and self.seeds < 1:
            raise ValueError("seeds: at least one seed per point")
        if isinstance(self.seeds, list) and (not self.seeds or len(set(self.seeds)) != len(
                self.seeds)):
            raise ValueError("seeds: a non-empty list of distinct seeds")
        if self.design == "random" and self.samples is None:
            raise ValueError("samples: a random design needs samples (how many points)")
        if self.design == "grid" and self.samples is not None:
            raise ValueError("samples: only a random design draws samples")
        return self


@dataclass(frozen=True)
class Point:
    """One combination of parameter values."""

    parameters: dict[str, Value]

    @property
    def point_id(self) -> str:
        canonical = json.dumps(self.parameters, sort_keys=True)
        return hashlib.sha1(canonical.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Task:
    """One run of a sweep: a point's scenario and one seed."""

    point: Point
    seed: int
    scenario: Scenario = field(repr=False)
    backend: str | None = None
    coverage: bool = False

    @property
    def run_id(self) -> str:
        return f"{self.point.point_id}-seed{self.seed}"


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: its base scenario, its points and its seeds."""

    name: str
    base: dict[str, Any] = field(repr=False)
    points: tuple[Point, ...]
    seeds: tuple[int, ...]
    backend: str | None = None
    source: str = "sweep"
    coverage: bool = False
    """Each run records its reach (``simulator.reach``)."""

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(self.points[0].parameters) if self.points else ()

    def scenario_at(self, point: Point) -> Scenario:
        data = copy.deepcopy(self.base)
        for path, value in point.parameters.items():
            set_dotted(data, path, value)
        try:
            return parse_scenario(data, source=f"{self.source}: the point {point.parameters}")
        except ScenarioError as error:
            raise ScenarioError(str(error)) from None

    def tasks(self) -> list[Task]:
        """Every run, point by point; each point is validated as a scenario."""
        return [Task(point, seed, scenario, self.backend, self.coverage)
                for point in self.points
                for scenario in [self.scenario_at(point)]
                for seed in self.seeds]

    @property
    def fingerprint(self) -> str:
        """What a result depends on besides its point: the base scenario, the
        backend, and the lab's own code (a changed simulator or store may give
        different results, so its old runs are not reused). Not its work
        ``limits``: they decide whether a run may start, never what it gives,
        so raising one reruns nothing already done."""
        base = {key: value for key, value in self.base.items() if key != "limits"}
        canonical = json.dumps({"base": base, "backend": self.backend,
                                **({"coverage": True} if self.coverage else {}),
                                "code": code_fingerprint(),
                                "plugins": plugins_fingerprint(self.base.get("plugins", []))},
                               sort_keys=True, default=str)
        return hashlib.sha1(canonical.encode()).hexdigest()[:12]


@functools.cache
def code_fingerprint() -> str:
    """A hash of the simulator's and the stores' source (Python and Lua), but
    for the analysis that reads results (a changed chart changes no run)."""
    root = Path(__file__).resolve().parents[2]
    analysis = root / "simulator" / "analysis"
    digest = hashlib.sha1()
    for package in ("simulator", "stores"):
        for path in sorted((root / package).rglob("*")):
            if path.suffix in (".py", ".lua") and analysis not in path.parents:
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def plugins_fingerprint(modules: Sequence[str]) -> str:
    """A hash of the plugins' own code: each module's source file and the
    scripts of every kind it registered (a changed plugin may give different
    results, as a changed lab may)."""
    digest = hashlib.sha1()
    for module in modules:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin and Path(spec.origin).is_file():
            digest.update(Path(spec.origin).read_bytes())
    for name, kind in sorted(registry.kinds().items()):
        if registry.plugins_for([name]) and set(registry.plugins_for([name])) <= set(modules):
            for script, text in sorted(kind.scripts.items()):
                digest.update(f"{name}/{script}\n{text}".encode())
    return digest.hexdigest()[:12]


def load_sweep(path: str | Path, seeds: int | list[int] | None = None,
               set_fields: dict[str, Any] | None = None,
               vary: dict[str, Any] | None = None,
               plugins: Sequence[str] = ()) -> Sweep:
    """Read and validate a sweep file; a bad one is a ``ScenarioError`` naming the field.

    ``seeds``, ``set_fields`` (dotted scenario paths, merged into ``[set]``)
    and ``vary`` (replacing entries of ``[vary]``) adjust the file's sweep, as a
    notebook's parameters do to run it small or large. ``plugins``: modules
    added to the base scenario's ``plugins``, so every run (in whichever
    worker) imports them before its scenario is built.
    """
    path = Path(path)
    data = read_toml(path, what="sweep file")
    if seeds is not None:
        data["seeds"] = seeds
    if set_fields:
        data["set"] = {**_flatten(data.get("set", {}), "set"), **set_fields}
    if vary:
        data["vary"] = {**_flatten(data.get("vary", {}), "vary"), **vary}
    try:
        spec = SweepFile.model_validate(data)
    except ValidationError as error:
        raise ScenarioError(f"{path}: invalid sweep\n"
                            f"{format_errors(error, model=SweepFile)}") from None
    base = read_toml((path.parent / spec.scenario), what="base scenario (the sweep's "
                     "'scenario' field)")
    if plugins:
        base["plugins"] = list(dict.fromkeys([*base.get("plugins", []), *plugins]))
    return build_sweep(spec, base, source=str(path))


def build_sweep(spec: SweepFile | dict[str, Any], base: dict[str, Any],
                source: str = "sweep") -> Sweep:
    """A sweep from a validated (or raw) sweep spec and a base scenario as a dict:
    the same path as a file, for notebooks that build sweeps in code."""
    if not isinstance(spec, SweepFile):
        try:
            spec = SweepFile.model_validate({"scenario": "(in code)", **spec})
        except ValidationError as error:
            raise ScenarioError(f"{source}: invalid sweep\n"
                                f"{format_errors(error, model=SweepFile)}") from None
    base = copy.deepcopy(base)
    for path, value in _flatten(spec.set, "set").items():
        set_dotted(base, path, value)
    vary = {path: _parameter(path, raw) for path, raw in _flatten(spec.vary, "vary").items()}
    if not vary:
        raise ScenarioError(f"{source}: vary: name at least one parameter to vary")
    if spec.design == "grid":
        points = _grid(vary)
    else:
        assert spec.samples is not None
        points = _random(vary, spec.samples, spec.design_seed)
    seeds = (tuple(range(1, spec.seeds + 1)) if isinstance(spec.seeds, int)
             else tuple(spec.seeds))
    sweep = Sweep(spec.name, base, tuple(points), seeds, spec.backend, source, spec.coverage)
    sweep.tasks()  # validate every point now, before any work starts
    return sweep


def _flatten(table: dict[str, Any], where: str, prefix: str = "") -> dict[str, Any]:
    """``{"network": {"reply_loss": [...]}}`` and ``{"network.reply_loss": [...]}``
    alike, as ``{"network.reply_loss": [...]}``: TOML writes dotted keys either way."""
    flat: dict[str, Any] = {}
    for name, value in table.items():
        path = f"{prefix}{name}"
        if isinstance(value, dict) and not ({"low", "high"} & value.keys()):
            if not value:
                raise ScenarioError(f"{where}.{path}: an empty table")
            flat.update(_flatten(value, where, prefix=f"{path}."))
        else:
            flat[path] = value
    return flat


def _parameter(path: str, raw: Any) -> list[Value] | Range:
    if isinstance(raw, list):
        if not raw:
            raise ScenarioError(f"vary.{path}: an empty list of values")
        if len({json.dumps(v, sort_keys=True) for v in raw}) != len(raw):
            raise ScenarioError(f"vary.{path}: a value is listed twice")
        return raw
    if isinstance(raw, dict):
        try:
            return Range.model_validate(raw)
        except ValidationError as error:
            raise ScenarioError(format_errors(error, prefix=("vary", path),
                                              model=Range)) from None
    raise ScenarioError(f"vary.{path}: expected a list of values or a range "
                        f"{{low = ..., high = ...}}, got {raw!r}")


def _grid(vary: dict[str, list[Value] | Range]) -> list[Point]:
    axes = []
    for path, parameter in vary.items():
        try:
            axes.append(parameter if isinstance(parameter, list) else parameter.grid())
        except ValueError as error:
            raise ScenarioError(f"vary.{path}: {error}") from None
    points = [{}]
    for path, values in zip(vary, axes, strict=True):
        points = [{**point, path: value} for point in points for value in values]
    return [Point(point) for point in points]


def _random(vary: dict[str, list[Value] | Range], samples: int, design_seed: int) -> list[Point]:
    # Python's own generator, seeded: the design is part of the sweep's input,
    # not of any run, so it needs no simulation stream.
    rng = random.Random(design_seed)
    points: dict[str, Point] = {}
    for _ in range(samples):
        parameters = {path: (rng.choice(p) if isinstance(p, list) else p.at(rng.random()))
                      for path, p in vary.items()}
        point = Point(parameters)
        points.setdefault(point.point_id, point)
    return list(points.values())


def duration_text(microseconds: int) -> str:
    """A duration as people write it, to four significant digits: ``"5.477s"``."""
    for unit in ("h", "m", "s", "ms"):
        if microseconds >= MICROSECONDS_PER[unit]:
            return f"{microseconds / MICROSECONDS_PER[unit]:.4g}{unit}"
    return f"{microseconds}us"


def numeric_columns(path: str, value: Any) -> dict[str, float]:
    """The columns a parameter written as people write it gets beside its text,
    so results can be plotted and compared as numbers: a duration also in
    seconds (``"250ms"`` → ``{path}_seconds = 0.25``), a rate also per second
    (``"30/min"`` → ``{path}_per_second = 0.5``); none for other values."""
    if not isinstance(value, str):
        return {}
    readings = (("seconds", lambda text: parse_duration_us(text) / MICROSECONDS_PER["s"]),
                ("per_second", parse_rate_per_second))
    for unit, read in readings:
        try:
            return {f"{path}_{unit}": read(value)}
        except ValueError:
            continue
    return {}

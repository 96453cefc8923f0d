"""The cost of exactness (notebook ``05_cost_of_exactness``): backend work per
admission as the holds in flight on one hot namespace grow.

The Redis budget stores are exact because they reserve centrally: every
reserve script reads the whole hash of live holds of its key (``HGETALL``),
reclaims the expired ones and compares the sum with the cap. So the work of
one admission grows with the holds in flight on that key: ``redis_v1`` reads
its subject's holds; ``redis_v2``, which also enforces a namespace cap, reads
the whole namespace's holds as well, on every admission of that namespace.

This module runs the base scenario (``data/scenarios/exactness-hot-namespace.toml``)
for each store and each fixed request duration (holds in flight = arrival
rate x duration, by Little's law), with ``simulator.run.compose.run_scenario`` so it
keeps the machine-dependent ``run_info`` a sweep's rows leave out, and turns
the runs into:

* holds in flight: the time average of the live holds over the arrival
  window (Poisson arrivals see time averages, so it is also the mean an
  admission meets);
* per admission: the store's own commands and scripts (counted by the lab's
  shim: deterministic), the lab's backend wall time (``backend_seconds``:
  the store's scripts plus the lab's own post-state observation and the
  client's decoding), the server's script time (``server_script_seconds``,
  real Redis only: still includes the shim's observation) and the time of the
  store's own scripts alone, replayed without the shim on a fresh backend
  (server time on real Redis, wall time on fakeredis);
* linear fits of those against holds in flight, the figures, and the
  conclusions computed from the runs.

A real ``redis-server`` is started for each run (``throwaway_redis``) so the
server's statistics are that run's alone, even with several runs at once.
Timings depend on the machine and its load; the counts and the holds in
flight depend only on the scenario and the seed.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.analysis import lab_path
from simulator.analysis.spread import plot_band, seed_bands
from simulator.backends import BackendSpec, open_redis_backend
from simulator.backends.local_server import redis_binary, throwaway_redis
from simulator.run.compose import run_scenario
from simulator.scenario.model import parse_scenario, read_toml, set_dotted
from simulator.sweeps.lifeline import tethered_pool
from stores.quantities import parse_duration_us

BASE_SCENARIO = lab_path("data", "scenarios", "exactness-hot-namespace.toml")
"""One namespace, a few subjects, caps never reached, no faults."""

STORES = ("axond_budget.redis_v1", "axond_budget.redis_v2")
"""The centrally reserving stores compared."""

NAMESPACE_CAPPED = frozenset({"axond_budget.redis_v2"})
"""Stores that need a namespace cap; the runs give them one that is never reached."""

VARIED = "workload.duration"
"""The scenario field varied: how long each request (and so each hold) lives."""

BACKENDS = ("auto", "redis", "fakeredis")
"""``auto``: a throwaway real Redis when ``redis-server`` is installed, else fakeredis."""

# Per-run columns (``runs`` frame).
HOLDS = "holds_in_flight"
COMMANDS = "store_commands_per_admission"
SCRIPTS = "scripts_per_admission"
BACKEND_US = "backend_us_per_admission"
SERVER_US = "server_script_us_per_admission"
STORE_ONLY_US = "store_scripts_alone_us_per_admission"

LABELS = {
    HOLDS: "holds in flight in the namespace (time average)",
    COMMANDS: "store commands per admission",
    SCRIPTS: "scripts per admission",
    BACKEND_US: "lab's backend wall time per admission (µs)",
    SERVER_US: "server script time per admission (µs)",
    STORE_ONLY_US: "store's own scripts alone, per admission (µs)",
}
"""Axis labels, with units."""

MICROSECONDS_PER_SECOND = 1_000_000


# ------------------------------------------------------------------ planning


def choose_backend(backend: str) -> str:
    """``redis`` or ``fakeredis`` for a notebook's ``backend`` parameter:
    ``auto`` picks real Redis when ``redis-server`` is installed. Asking for
    ``redis`` without the binary is an error, not a silent fallback."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    installed = redis_binary() is not None
    if backend == "redis" and not installed:
        raise ValueError("backend = 'redis' but no redis-server is installed "
                         "(apt-get install redis-server), or use 'auto' or 'fakeredis'")
    if backend == "fakeredis" or not installed:
        return "fakeredis"
    return "redis"


def backend_description(chosen: str, asked: str) -> str:
    """One sentence for the notebook: which backend the runs used, and why."""
    if chosen == "redis":
        return ("Runs on **real Redis**: a throwaway `redis-server` started for each run "
                "(so the server's script statistics are that run's alone).")
    why = ("no `redis-server` is installed" if asked == "auto" and redis_binary() is None
           else "the `backend` parameter asked for it")
    return (f"Runs on **fakeredis** ({why}): the server keeps no script statistics, so "
            "the server-time figure is left out and the store's scripts alone are timed "
            "by the wall clock of their replay. fakeredis runs Lua in this process, "
            "much slower than a real server: compare shapes, not absolute times.")


def seed_list(seeds: int | Sequence[int]) -> list[int]:
    """A seed count (seeds 1..N) or an explicit list, as a list."""
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"seeds: at least one, got {seeds}")
        return list(range(1, seeds + 1))
    chosen = [int(seed) for seed in seeds]
    if not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(f"seeds: a non-empty list of distinct seeds, got {list(seeds)}")
    return chosen


def scenario_data(base: Mapping[str, Any], store: str, duration: str,
                  set_fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The base scenario with ``set_fields`` (dotted paths), ``store`` and the
    request duration. A namespace-capped store gets a namespace cap of
    subject cap x subjects, so neither cap is ever the one that decides."""
    data: dict[str, Any] = copy.deepcopy(base)
    for dotted, value in (set_fields or {}).items():
        set_dotted(data, dotted, value)
    data["store"] = store
    set_dotted(data, VARIED, duration)
    settings = data.setdefault("store_settings", {})
    if store in NAMESPACE_CAPPED and "namespace_cap_microdollars" not in settings:
        subjects = data.get("workload", {}).get("keys", {}).get("subjects", 100)
        subject_cap = settings.get("subject_cap_microdollars", 1_000_000)
        settings["namespace_cap_microdollars"] = subject_cap * subjects
    return data


@dataclass(frozen=True)
class Task:
    """One run: a store, a request duration, a seed, and its scenario."""

    store: str
    duration: str
    seed: int
    scenario: dict[str, Any]

    @property
    def duration_seconds(self) -> float:
        return parse_duration_us(self.duration) / MICROSECONDS_PER_SECOND


def plan_tasks(stores: Sequence[str], durations: Sequence[str], seeds: int | Sequence[int],
               set_fields: Mapping[str, Any] | None = None,
               base: str | Path = BASE_SCENARIO) -> list[Task]:
    """Every store x duration x seed, each scenario validated now (a bad
    parameter fails before any run)."""
    base_data = read_toml(Path(base))
    tasks = []
    for store in stores:
        for duration in durations:
            data = scenario_data(base_data, store, duration, set_fields)
            parse_scenario(data, source=f"{base} ({store}, {VARIED} = {duration})")
            tasks.extend(Task(store, duration, seed, data) for seed in seed_list(seeds))
    return tasks


# ------------------------------------------------------------------ running


@contextmanager
def _backend_url(kind: str) -> Iterator[str]:
    if kind == "fakeredis":
        yield "fakeredis"
        return
    with throwaway_redis() as server:
        if server is None:
            raise RuntimeError("no redis-server installed: use backend 'fakeredis' or 'auto'")
        yield server.url


def store_scripts_alone_seconds(recorded: list[tuple[str, tuple[str, ...], tuple[str, ...]]],
                                backend: str) -> float:
    """Time of the store's own scripts (no lab shim around them), replayed in
    order on a fresh namespace of ``backend``: the server's own script time on
    real Redis (``INFO commandstats``, so this server must have no other
    client), the replay's wall time on fakeredis (which keeps no statistics).
    With no faults in the run, the replay meets the states the run met."""
    target = open_redis_backend(BackendSpec.parse(backend))
    try:
        client = target.client
        shas = {body: client.script_load(body) for body in {body for body, _, _ in recorded}}
        before = target.server_script_seconds()
        started = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        for body, keys, args in recorded:
            pipe.execute_command("EVALSHA", shas[body], len(keys),
                                 *(target.namespace + key for key in keys), *args)
        pipe.execute(raise_on_error=False)
        wall = time.perf_counter() - started
        after = target.server_script_seconds()
    finally:
        target.close()
    return wall if before is None or after is None else after - before


def measure(task: Task, backend_kind: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one task and time its store's scripts alone; return the run's row
    and its aggregate metric rows (plain data, cheap to ship from a worker)."""
    scenario = parse_scenario(task.scenario, source=f"{task.store} {task.duration}")
    recorded: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
    with _backend_url(backend_kind) as url:
        result = run_scenario(scenario, seed=task.seed, backend=url, record_scripts=recorded)
        alone = store_scripts_alone_seconds(recorded, url)
    summary, info = result.summary, result.run_info
    row = {
        "store": task.store, VARIED: task.duration, "duration_seconds": task.duration_seconds,
        "seed": task.seed, "backend": backend_kind,
        "arrival_window_us": scenario.duration_us,
        **{name: summary.get(name) for name in (
            "requests_arrived", "requests_admitted", "requests_denied", "scripts_executed",
            "store_commands_executed")},
        "backend_seconds": info.get("backend_seconds"),
        "server_script_seconds": info.get("server_script_seconds"),
        "store_scripts_alone_seconds": alone,
        "wall_seconds": info.get("wall_seconds"),
    }
    key = {"store": task.store, VARIED: task.duration, "seed": task.seed}
    rows = result.sampler.rows if result.sampler is not None else []
    metrics = [{**key, **sample} for sample in rows if sample.get("namespace") == "*"]
    return row, metrics


def run_tasks(tasks: Sequence[Task], backend_kind: str, workers: int | None = None,
              progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run every task (``workers`` processes, None or 1: one run at a time in
    this process, since the timings are the measurement and parallel runs
    share the CPU) with a progress bar. Returns the runs (one row each, in
    task order) and their aggregate metric series."""
    from simulator.sweeps.progress import progress_bar

    results: dict[int, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    with progress_bar(total=len(tasks), desc="runs", unit="run", disable=not progress) as bar:
        if workers is None or workers <= 1:
            for index, task in enumerate(tasks):
                results[index] = measure(task, backend_kind)
                bar.update(1)
        else:
            with tethered_pool(workers) as executor:
                futures = {executor.submit(measure, task, backend_kind): index
                           for index, task in enumerate(tasks)}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update(1)
    runs = pd.DataFrame([results[index][0] for index in range(len(tasks))])
    metrics = pd.DataFrame([sample for index in range(len(tasks))
                            for sample in results[index][1]])
    return runs, metrics


def write_results(runs: pd.DataFrame, metrics: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Keep the runs and their metric series as Parquet in ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "runs.parquet", out_dir / "metrics.parquet"]
    runs.to_parquet(written[0], index=False)
    metrics.to_parquet(written[1], index=False)
    return written


# ------------------------------------------------------------------ per admission


def holds_in_flight(metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per run (store, duration, seed): the time average of the live holds in
    the namespace over the arrival window, from the aggregate subject-scope
    samples (every hold is one subject's, so their sum is the namespace's)."""
    keys = ["store", VARIED, "seed"]
    window = runs[[*keys, "arrival_window_us"]]
    samples = metrics[(metrics["namespace"] == "*") & (metrics["scope"] == "subject")]
    samples = samples.merge(window, on=keys, how="inner")
    samples = samples[samples["time_us"] < samples["arrival_window_us"]]
    return (samples.groupby(keys, sort=False)["holds_live"].mean()
            .rename(HOLDS).reset_index())


def per_admission(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """The runs with holds in flight and the per-admission figures: store
    commands, scripts, and microseconds of backend wall time, of server script
    time (NaN without real Redis) and of the store's scripts alone. Per
    admission means per arrived request: nothing is denied here (see
    ``denied_runs``)."""
    frame = runs.merge(holds_in_flight(metrics, runs), on=["store", VARIED, "seed"],
                       how="left")
    arrived = frame["requests_arrived"].astype(float)
    frame[COMMANDS] = frame["store_commands_executed"] / arrived
    frame[SCRIPTS] = frame["scripts_executed"] / arrived
    for seconds, column in (("backend_seconds", BACKEND_US),
                            ("server_script_seconds", SERVER_US),
                            ("store_scripts_alone_seconds", STORE_ONLY_US)):
        frame[column] = pd.to_numeric(frame[seconds], errors="coerce") * 1e6 / arrived
    return frame


def denied_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Runs in which some request was not admitted: they break the premise
    (the caps are meant never to decide) and should be looked at."""
    return frame[frame["requests_admitted"] != frame["requests_arrived"]]


# ------------------------------------------------------------------ fits


def linear_fits(frame: pd.DataFrame, y: str, x: str = HOLDS) -> pd.DataFrame:
    """Per store: the least-squares line ``y = intercept + slope * x`` over its
    runs, its R² (1.0 for a perfect line; NaN when y does not vary), and the
    number of runs. Stores with fewer than two distinct x values, or no y, are
    left out."""
    rows = []
    for store, runs in frame.groupby("store", sort=True):
        runs = runs[[x, y]].dropna()
        if runs[x].nunique() < 2:
            continue
        slope, intercept = np.polyfit(runs[x], runs[y], 1)
        residual = runs[y] - (intercept + slope * runs[x])
        spread = ((runs[y] - runs[y].mean()) ** 2).sum()
        r2 = 1 - (residual ** 2).sum() / spread if spread > 0 else math.nan
        rows.append({"store": store, "intercept": float(intercept), "slope": float(slope),
                     "r2": float(r2), "runs": len(runs)})
    return pd.DataFrame(rows, columns=["store", "intercept", "slope", "r2", "runs"])


def saturating_rate(intercept_us: float, slope_us: float, duration_s: float) -> float:
    """The admission rate (per second) at which a hot namespace's scripts
    would keep a single-threaded server busy all the time, if each admission
    costs ``intercept + slope * holds`` µs and holds = rate x duration
    (Little's law): the positive root of slope·d·r² + intercept·r = 10⁶."""
    a = slope_us * duration_s
    if a <= 0:
        return math.inf if intercept_us <= 0 else MICROSECONDS_PER_SECOND / intercept_us
    return (-intercept_us + math.sqrt(intercept_us ** 2 + 4 * a * MICROSECONDS_PER_SECOND)) / (
        2 * a)


# ------------------------------------------------------------------ figures


def bands_against_holds(frame: pd.DataFrame, y: str, low: float = 0.1,
                        high: float = 0.9) -> pd.DataFrame:
    """``seed_bands`` of ``y`` per store and request duration, placed at the
    median holds in flight of that point's seeds (holds in flight differ a
    little from seed to seed, so they cannot group the runs themselves)."""
    keys = ["store", "duration_seconds"]
    bands = seed_bands(frame, "duration_seconds", y, by=["store"], low=low, high=high)
    holds = frame.groupby(keys, sort=True)[HOLDS].median().rename(HOLDS).reset_index()
    return bands.merge(holds, on=keys).sort_values(["store", HOLDS])


def _store_label(store: str) -> str:
    return store.removeprefix("axond_budget.")


def _plot_per_store(ax: Axes, frame: pd.DataFrame, y: str, fit: bool) -> None:
    fits = linear_fits(frame, y) if fit else pd.DataFrame(columns=["store"])
    for store, bands in bands_against_holds(frame, y).groupby("store", sort=True):
        plot_band(ax, bands, HOLDS, label=f"{_store_label(store)} (median, 10-90% of seeds)")
        line = fits[fits["store"] == store]
        if not line.empty:
            xs = np.linspace(0, bands[HOLDS].max(), 20)
            intercept, slope = line["intercept"].iloc[0], line["slope"].iloc[0]
            ax.plot(xs, intercept + slope * xs, linestyle="--", linewidth=1,
                    color=ax.lines[-1].get_color(),
                    label=f"{_store_label(store)} fit: {intercept:.0f} + {slope:.2f}·holds")
    ax.set_xlabel(LABELS[HOLDS])
    ax.set_ylabel(LABELS[y])
    ax.set_xlim(left=0)
    # From zero, with headroom: a flat line must not sit on the frame's edge.
    top = max(frame[y].max(), ax.get_ylim()[1] if fit else 0.0)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def plot_counts(frame: pd.DataFrame) -> Figure:
    """Store commands and scripts per admission against holds in flight, one
    line per store (left and right panels)."""
    figure = Figure(figsize=(12, 4.5))
    left, right = figure.subplots(1, 2)
    for ax, y, title in ((left, COMMANDS, "Commands the store's scripts ran, per admission"),
                         (right, SCRIPTS, "Scripts sent, per admission")):
        _plot_per_store(ax, frame, y, fit=False)
        ax.set_title(title, fontsize=11)
    figure.suptitle("Counted work per admission against holds in flight (one hot namespace)")
    figure.tight_layout()
    return figure


def time_columns(frame: pd.DataFrame) -> list[str]:
    """The time-per-admission columns the runs have values for (the server's
    script time only on real Redis)."""
    return [column for column in (BACKEND_US, SERVER_US, STORE_ONLY_US)
            if column in frame and frame[column].notna().any()]


TIME_TITLES = {
    BACKEND_US: "Lab's wall time waiting on the backend\n(store scripts + lab's observation)",
    SERVER_US: "Server's script time (INFO commandstats)\n(store scripts + lab's shim)",
    STORE_ONLY_US: "Store's own scripts alone, replayed\n(no lab shim)",
}


def plot_times(frame: pd.DataFrame) -> Figure:
    """Backend time per admission (µs) against holds in flight: one panel per
    time measure the runs have, one line per store with its seed band and its
    linear fit (dashed)."""
    columns = time_columns(frame)
    figure = Figure(figsize=(6 * max(1, len(columns)), 4.8))
    axes = figure.subplots(1, max(1, len(columns)), squeeze=False)[0]
    for ax, y in zip(axes, columns, strict=False):
        _plot_per_store(ax, frame, y, fit=True)
        ax.set_title(TIME_TITLES[y], fontsize=10)
    figure.suptitle("Backend time per admission against holds in flight (one hot namespace)")
    figure.tight_layout()
    return figure


# ------------------------------------------------------------------ conclusions


def _range_text(values: pd.Series, digits: int = 2) -> str:
    return f"{values.min():.{digits}f} to {values.max():.{digits}f}"


def counts_conclusion(frame: pd.DataFrame, flat_within: float = 0.05) -> str:
    """Per store: how the counted commands and scripts per admission moved
    while the holds in flight grew, and whether that is flat (every point
    within ``flat_within`` of the smallest)."""
    lines = []
    for store, runs in frame.groupby("store", sort=True):
        holds = runs[HOLDS]
        parts = []
        for column, what in ((COMMANDS, "store commands"), (SCRIPTS, "scripts")):
            values = runs[column]
            flat = values.max() <= values.min() * (1 + flat_within)
            shape = (f"flat (within {flat_within:.0%})" if flat
                     else f"varying by {values.max() / values.min() - 1:.0%}")
            parts.append(f"{what} per admission {_range_text(values)}, {shape}")
        lines.append(f"- `{_store_label(store)}`, holds in flight {_range_text(holds, 0)}: "
                     + "; ".join(parts) + ".")
    return "\n".join(lines)


def times_conclusion(frame: pd.DataFrame, similar_within: float = 0.1) -> str:
    """Per time measure and store: the fitted µs per admission at no holds,
    the µs added by each hold in flight, and how well a line fits (R²); and
    how much steeper the steepest store is than the gentlest (or that they
    are alike, when their slopes are within ``similar_within``)."""
    lines = []
    for column in time_columns(frame):
        fits = linear_fits(frame, column)
        if fits.empty:
            continue
        lines.append(f"**{LABELS[column]}**")
        for fit in fits.itertuples():
            lines.append(f"- `{_store_label(fit.store)}`: {fit.intercept:.0f} µs + "
                         f"{fit.slope:.2f} µs per hold in flight (R² = {fit.r2:.2f}, "
                         f"{fit.runs} runs)")
        if len(fits) > 1 and fits["slope"].min() > 0:
            steep = fits.loc[fits["slope"].idxmax()]
            gentle = fits.loc[fits["slope"].idxmin()]
            ratio = steep.slope / gentle.slope
            if ratio < 1 + similar_within:
                lines.append(f"- every store pays about the same per hold in flight "
                             f"(slopes within {similar_within:.0%})")
            else:
                lines.append(f"- each hold in flight costs `{_store_label(steep.store)}` "
                             f"{ratio:.1f}x what it costs `{_store_label(gentle.store)}`")
    return "\n".join(lines)


def saturation_table(frame: pd.DataFrame, durations_s: Sequence[float] = (0.1, 1.0, 10.0),
                     column: str | None = None) -> pd.DataFrame:
    """Per store and mean request duration: the admission rate of one hot
    namespace at which its scripts alone would keep a single-threaded server
    busy (``saturating_rate`` from the linear fit of ``column``; default: the
    store's scripts alone), and the holds in flight at that rate. Valid for the
    runs' own subjects per namespace (the fit is against the namespace's
    holds); a linear extrapolation that ignores everything else the server does."""
    column = column or STORE_ONLY_US
    rows = []
    for fit in linear_fits(frame, column).itertuples():
        for duration in durations_s:
            rate = saturating_rate(max(fit.intercept, 0.0), fit.slope, duration)
            rows.append({"store": _store_label(fit.store), "request duration (s)": duration,
                         "saturating admissions/s": round(rate),
                         "holds in flight then": round(rate * duration)})
    return pd.DataFrame(rows, columns=["store", "request duration (s)",
                                       "saturating admissions/s", "holds in flight then"])



def subjects_of(tasks: Sequence[Task]) -> int:
    """How many subjects share the namespace in these runs (the same in all)."""
    counts = {task.scenario.get("workload", {}).get("keys", {}).get("subjects", 100)
              for task in tasks}
    if len(counts) != 1:
        raise ValueError(f"the runs differ in their subject count: {sorted(counts)}")
    return counts.pop()


def hash_reads_note(subjects: int) -> str:
    """What each store's reserve reads, for ``subjects`` equally busy subjects
    sharing N holds in flight, and what that leads one to expect of the
    ratio of their per-hold costs (an expectation, not a measurement)."""
    share = "N" if subjects == 1 else f"N/{subjects}"
    return (f"With {subjects} equally busy subject(s) sharing N holds in flight, a "
            f"`redis_v1` reserve reads its subject's hash (about {share} holds) and a "
            f"`redis_v2` reserve its subject's hash and the namespace's (about {share} + N): "
            f"{subjects + 1}x as many holds. If reading holds were the only per-hold "
            f"cost, `redis_v2`'s slope would be {subjects + 1}x `redis_v1`'s. Expect the "
            "measured ratio (above) to be of that order but not equal: Redis keeps small "
            "hashes (up to 128 entries by default) as compact lists whose writes are also "
            "linear in their size, which weighs on the small subject hashes most, and "
            "timings on a busy machine are noisy.")


def point_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per store and request duration: the seeds' medians of holds in
    flight and of every per-admission figure the runs have, and the runs."""
    columns = [HOLDS, COMMANDS, SCRIPTS, *time_columns(frame)]
    grouped = frame.groupby(["store", VARIED, "duration_seconds"], sort=False)
    table = grouped[columns].median()
    table["runs"] = grouped.size()
    table = table.reset_index().sort_values(["store", "duration_seconds"])
    table["store"] = table["store"].map(_store_label)
    return table.drop(columns="duration_seconds").round(2).reset_index(drop=True)

"""The race-report gallery (notebook ``04_race_report_gallery``): every report
of ``data/races`` replayed on its broken variant and on the fixed store.

For each report the gallery shows what ``python -m simulator replay`` says,
twice: on the variant (REPRODUCED or not, the invariant's metric, and whether
the trace is the one recorded beside the report) and on the fixed store with
the same scenario, seed and fault schedule (the invariant holds, or not). Each
side's timeline (``simulator.present.timeline.draw_timeline``, a PNG) is drawn, and the
two are laid side by side in one figure. A table sums the catalogue up.

This module holds all of it:

* ``report_paths``: which reports (all, or a named subset);
* ``replay_side``: one replay, judged, with its timeline written (runs in a
  worker process when the gallery runs in parallel);
* ``run_gallery``: every report, both sides, as ``GalleryEntry`` objects;
* ``entry_markdown``, ``side_by_side``, ``summary_table``,
  ``gallery_conclusion``: what the notebook displays.

Nothing here is random: a replay depends only on the report.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, as_completed
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.image
import pandas as pd
from matplotlib.figure import Figure

from simulator.analysis import lab_path
from simulator.scenario.conditions import Expectation
from simulator.scenario.model import parse_scenario
from simulator.search.races import RaceReport, load_report, replay
from simulator.sweeps.lifeline import tethered_pool

TIMELINE_SAMPLE_EVERY = "20ms"
"""Sampling interval of the replays, as ``replay --plot`` uses: fine enough for
the timeline's spend panel (sampling never changes the trace)."""

STORE_FIELDS = ("store",)
"""Top-level scenario fields naming the store the fleet runs."""


def races_dir() -> Path:
    """The lab's catalogue of race reports."""
    return lab_path("data", "races")


def report_paths(reports: Sequence[str] | None = None, directory: Path | None = None
                 ) -> list[Path]:
    """The reports to show: every ``*.toml`` of ``directory`` (default: the
    lab's ``data/races``) in name order when ``reports`` is None, else the named
    ones in the order given (a name with or without ``.toml``).

    Raises ``ValueError`` naming the reports that do not exist."""
    directory = races_dir() if directory is None else Path(directory)
    available = sorted(directory.glob("*.toml"))
    if reports is None:
        return available
    by_name = {path.stem: path for path in available}
    wanted = [Path(name).name.removesuffix(".toml") for name in reports]
    unknown = [name for name in wanted if name not in by_name]
    if unknown:
        raise ValueError(f"no race report {', '.join(map(repr, unknown))} in {directory}; "
                         f"there are: {', '.join(by_name) or 'none'}")
    return [by_name[name] for name in wanted]


def stores_named(changes: dict[str, Any], scenario: dict[str, Any]) -> str:
    """The store(s) a report side runs: the ``store`` it sets, else the
    targets of the migrations it changes (``migrations.N.to``), else the
    scenario's own store. Several distinct ones are joined with ``, ``."""
    named: list[str] = []
    for dotted, value in changes.items():
        if dotted in STORE_FIELDS or dotted.endswith(".to"):
            if str(value) not in named:
                named.append(str(value))
    return ", ".join(named) if named else str(scenario.get("store", "?"))


@dataclass(frozen=True)
class Side:
    """One replay of a report, judged: on its variant or on the fixed store."""

    store: str
    """The store(s) this side ran (see ``stores_named``)."""
    value: Any
    """The invariant's metric in this run (None when the summary lacks it)."""
    broken: bool
    """Whether the invariant's ``broken_when`` condition held in this run."""
    fingerprint: str
    """This run's trace fingerprint."""
    divergence: str | None
    """Variant side only: where the trace parts from the recorded one (None: it does not)."""
    timeline: Path | None
    """The timeline PNG drawn for this run, or None when none was asked for."""


@dataclass(frozen=True)
class GalleryEntry:
    """A report with both of its replays."""

    path: Path
    title: str
    story: str
    invariant: str
    """The invariant as the report writes it: ``metric broken when OP threshold``."""
    metric: str
    recorded_fingerprint: str | None
    variant: Side
    fixed: Side

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def reproduced(self) -> bool:
        """The variant breaks the invariant, as the report says it does."""
        return self.variant.broken

    @property
    def fingerprint_ok(self) -> bool | None:
        """The variant's trace is the recorded one; None when the report records none."""
        if self.recorded_fingerprint is None:
            return None
        return (self.variant.divergence is None
                and self.variant.fingerprint == self.recorded_fingerprint)

    @property
    def fixed_holds(self) -> bool:
        """The fixed store keeps the invariant under the same scenario, seed and schedule."""
        return not self.fixed.broken


def invariant_text(report: RaceReport) -> str:
    """``metric broken when < 0``, as the report's ``[invariant]`` says (a
    compound condition or a reference kind: ``broken when ...``)."""
    invariant = report.invariant
    if isinstance(invariant, Expectation):
        return f"{invariant.metric} broken when {invariant.comparison}"
    rules = [] if invariant is None else [str(invariant)]
    rules += [f"worse than {report.reference}"] if report.reference is not None else []
    return f"broken when {' or '.join(rules)}"


def replay_side(path: Path, against_fixed: bool, timeline: Path | None = None,
                backend: str | None = None) -> Side:
    """Replay the report at ``path`` on its variant (or, ``against_fixed``, on
    the fixed store), judge its invariant, and draw its timeline to
    ``timeline`` (a PNG path) when given. A top-level function so a worker
    process can run it; the heavy run result stays in the worker."""
    # The timeline module picks a file-only matplotlib backend when imported:
    # import it here, in whichever process draws, not at module import.
    from simulator.present.timeline import draw_timeline

    report = load_report(path)
    found = replay(report, against_fixed=against_fixed, backend=backend,
                   sample_every=TIMELINE_SAMPLE_EVERY if timeline is not None else None)
    changes = report.fixed if against_fixed else report.variant
    store = stores_named(changes, report.scenario)
    if timeline is not None:
        settings = parse_scenario(report.scenario_for(changes), source=str(path)).settings
        which = "fixed store" if against_fixed else "variant"
        draw_timeline(found.result, timeline, report.schedule, settings=settings,
                      title=f"{which}: {store}")
    return Side(store=store, value=found.value, broken=found.reproduced,
                fingerprint=found.result.summary["trace_fingerprint"],
                divergence=found.divergence, timeline=timeline)


def _executor(workers: int) -> AbstractContextManager[Executor]:
    # forkserver, as the sweeps do: workers start clean, not as forks of a
    # kernel that holds threads; and they die with the notebook's kernel.
    return tethered_pool(workers)


def run_gallery(paths: Sequence[Path], out_dir: Path, workers: int | None = None,
                backend: str | None = None, timelines: bool = True,
                progress: Callable[[str], None] | None = None) -> list[GalleryEntry]:
    """Replay every report of ``paths`` on its variant and on the fixed store;
    timelines go to ``out_dir/NAME.variant.png`` and ``NAME.fixed.png``.

    ``workers``: processes replaying at once (None: one per core, at most one
    per replay; 1: in this process). ``progress(line)`` is told of each
    finished replay. Entries come back in the order of ``paths``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    reports = [load_report(path) for path in paths]  # a bad report fails before any run
    jobs = [(report, against_fixed) for report in reports for against_fixed in (False, True)]

    def arguments(report: RaceReport, against_fixed: bool) -> tuple[Any, ...]:
        side = "fixed" if against_fixed else "variant"
        png = out_dir / f"{report.path.stem}.{side}.png" if timelines else None
        return report.path, against_fixed, png, backend

    count = min(workers or os.cpu_count() or 1, len(jobs)) if jobs else 1
    sides: dict[tuple[Path, bool], Side] = {}
    if count <= 1:
        for report, against_fixed in jobs:
            sides[report.path, against_fixed] = replay_side(*arguments(report, against_fixed))
            _tell(progress, report, against_fixed)
    else:
        with _executor(count) as executor:
            futures = {executor.submit(replay_side, *arguments(report, against_fixed)):
                       (report, against_fixed) for report, against_fixed in jobs}
            for future in as_completed(futures):
                report, against_fixed = futures[future]
                sides[report.path, against_fixed] = future.result()
                _tell(progress, report, against_fixed)
    return [GalleryEntry(path=report.path, title=report.title, story=report.story.strip(),
                         invariant=invariant_text(report),
                         metric=", ".join(report.invariant.metrics) if report.invariant
                         else "its invariants",
                         recorded_fingerprint=report.fingerprint,
                         variant=sides[report.path, False], fixed=sides[report.path, True])
            for report in reports]


def _tell(progress: Callable[[str], None] | None, report: RaceReport,
          against_fixed: bool) -> None:
    if progress is not None:
        side = "fixed store" if against_fixed else "variant"
        progress(f"replayed {report.path.stem} on the {side}")


# ------------------------------------------------------------------ what is shown


def variant_verdict(entry: GalleryEntry) -> str:
    """The variant's line: REPRODUCED or NOT REPRODUCED, with the metric."""
    verdict = "REPRODUCED" if entry.reproduced else "NOT REPRODUCED"
    return f"{verdict}: {entry.metric} = {entry.variant.value!r}"


def fixed_verdict(entry: GalleryEntry) -> str:
    """The fixed store's line: HOLDS or BROKEN TOO, with the metric."""
    verdict = "HOLDS" if entry.fixed_holds else "BROKEN on the fixed store too"
    return f"{verdict}: {entry.metric} = {entry.fixed.value!r}"


def fingerprint_verdict(entry: GalleryEntry) -> str:
    """Whether the variant replayed the recorded trace, and if not where it parted."""
    if entry.fingerprint_ok is None:
        return "no fingerprint recorded in the report"
    if entry.fingerprint_ok:
        return f"trace fingerprint matches the recorded one ({entry.recorded_fingerprint})"
    where = entry.variant.divergence or "the fingerprints differ"
    return (f"trace differs from the recorded one (recorded {entry.recorded_fingerprint}, "
            f"now {entry.variant.fingerprint}): {where}")


def entry_markdown(entry: GalleryEntry) -> str:
    """The report's heading, story and both verdicts, as Markdown."""
    return "\n".join([
        f"### {entry.title}",
        "",
        f"Report `{entry.name}`: invariant `{entry.invariant}`; variant "
        f"`{entry.variant.store}`, fixed store `{entry.fixed.store}`.",
        "",
        entry.story,
        "",
        f"- **Variant** `{entry.variant.store}`: **{variant_verdict(entry)}**; "
        f"{fingerprint_verdict(entry)}.",
        f"- **Fixed store** `{entry.fixed.store}` (same scenario, seed and schedule): "
        f"**{fixed_verdict(entry)}**.",
    ])


def side_by_side(entry: GalleryEntry, width_in: float = 18.0) -> Figure:
    """The variant's timeline (left) beside the fixed store's (right), each
    titled with its verdict, under the report's title. Both PNGs must exist
    (``run_gallery`` with ``timelines=True``)."""
    images = []
    for side in (entry.variant, entry.fixed):
        if side.timeline is None:
            raise ValueError(f"{entry.name}: no timeline was drawn for {side.store}")
        images.append(matplotlib.image.imread(side.timeline))
    # Tall enough for the taller picture at the width each panel gets.
    aspect = max(image.shape[0] / image.shape[1] for image in images)
    figure = Figure(figsize=(width_in, width_in / 2 * aspect + 1.1))
    axes = figure.subplots(1, 2)
    titles = (f"variant {entry.variant.store}\n{variant_verdict(entry)}",
              f"fixed store {entry.fixed.store}\n{fixed_verdict(entry)}")
    for panel, image, title, side in zip(axes, images, titles, (entry.variant, entry.fixed),
                                         strict=True):
        panel.imshow(image)
        panel.set_axis_off()
        panel.set_title(title, fontsize=10, color="tab:red" if side.broken else "tab:green")
    figure.suptitle(f"{entry.title}\n(same scenario, seed and fault schedule; "
                    "top: involved replicas' requests and faults; bottom: recorded against "
                    "true spend)", fontsize=11)
    figure.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.86, wspace=0.03)
    return figure


SUMMARY_COLUMNS = ("report", "variant", "invariant", "reproduced", "fingerprint ok",
                   "fixed store holds", "variant value", "fixed value")


def summary_table(entries: Sequence[GalleryEntry]) -> pd.DataFrame:
    """One row per report: the report, its variant and invariant, and the three
    verdicts (reproduced on the variant, recorded trace, invariant held on the
    fixed store) with the metric on each side. ``fingerprint ok`` is None when
    a report records no fingerprint."""
    rows = [{"report": entry.name, "variant": entry.variant.store,
             "invariant": entry.invariant, "reproduced": entry.reproduced,
             "fingerprint ok": entry.fingerprint_ok, "fixed store holds": entry.fixed_holds,
             "variant value": entry.variant.value, "fixed value": entry.fixed.value}
            for entry in entries]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def gallery_conclusion(entries: Sequence[GalleryEntry]) -> str:
    """What the table says, in words computed from it: how many reports
    reproduced, replayed their recorded trace and held on the fixed store,
    naming each one that did not."""
    if not entries:
        return "No race report was replayed."
    total = len(entries)
    lines = []
    for label, failing in (
            ("reproduced on their variant", [e for e in entries if not e.reproduced]),
            ("replayed the trace recorded beside them",
             [e for e in entries if e.fingerprint_ok is False]),
            ("held on the fixed store", [e for e in entries if not e.fixed_holds])):
        if failing:
            names = ", ".join(f"`{entry.name}`" for entry in failing)
            lines.append(f"- {total - len(failing)} of {total} {label}; not: {names}.")
        else:
            lines.append(f"- All {total} {label}.")
    unrecorded = [e for e in entries if e.fingerprint_ok is None]
    if unrecorded:
        names = ", ".join(f"`{entry.name}`" for entry in unrecorded)
        lines.append(f"- Recorded no fingerprint to compare with: {names}.")
    if all(e.reproduced and e.fixed_holds and e.fingerprint_ok is not False for e in entries):
        lines.append("\nThe catalogue is healthy: every race still breaks its variant, the "
                     "lab replays it exactly, and the fixed store keeps the invariant.")
    else:
        lines.append("\nA report that no longer reproduces, or whose trace parted from "
                     "the recorded one, needs a look: the first differing event (above) "
                     "tells whether the store or the lab changed.")
    return "\n".join(lines)


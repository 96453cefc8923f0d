"""The checker-power notebook's figures and tables (``09_checker_power``),
drawn from a mutation campaign's own tables: ``mutants``, one row per mutant
(``simulator.mutate.campaign.as_records``), and ``rates``, its kill rates by
operator class and by invariant (``simulator.mutate.table.kill_rates``). Both
come in as DataFrames, and the survivor classes' meanings as an argument:
``mutate`` is this layer's peer, so nothing here imports it. Nothing here
computes a verdict; each function only draws or lays out one."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

BAR_COLOUR = "#4a7ab5"


# ------------------------------------------------------------------ kill rates


def plot_kill_rates(mutants: pd.DataFrame, rates: pd.DataFrame) -> Figure:
    """Two panels of ``rates``: per operator class, the share of its judged
    mutants detected; per invariant, its share of all judged mutants. Each
    bar is written with detected/judged; the title counts ``mutants`` and
    the judged among them (the probe found them different)."""
    figure = Figure(figsize=(12, 3.8), layout="constrained")
    by_class, by_invariant = figure.subplots(1, 2)
    _rate_bars(by_class, rates[rates["by"] == "operator"], "By operator class",
               "operator class")
    _rate_bars(by_invariant, rates[rates["by"] == "invariant"], "By invariant", "invariant")
    judged = int((mutants["detected"] | (mutants["survived_as"] == "undetected")).sum())
    figure.suptitle(f"Kill rates: {len(mutants)} mutant(s), {judged} judged "
                    "(reached, not equivalent)")
    return figure


def _rate_bars(ax: Axes, chosen: pd.DataFrame, title: str, label: str) -> None:
    """One horizontal bar per row of ``chosen`` (a slice of the kill rates),
    top to bottom in its order, written with detected/judged."""
    ax.barh(chosen["name"], chosen["kill_rate"] * 100, color=BAR_COLOUR)
    for position, (_, rate) in enumerate(chosen.iterrows()):
        ax.annotate(f"{rate['detected']}/{rate['judged']}", (rate["kill_rate"] * 100, position),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, 115)  # room past 100% for the detected/judged beside a full bar
    ax.invert_yaxis()
    ax.set_xlabel("detected, % of judged mutants")
    ax.set_ylabel(label)
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)


# ------------------------------------------------------------------ time to kill


def plot_time_to_kill(mutants: pd.DataFrame, schedules: int, budget_s: float) -> Figure:
    """Two panels of the detected ``mutants``: how many of them each count
    of schedules killed, from 0 (the fault-free run) to the hunt's
    ``schedules``; and the share of them killed within a wall time (log
    scale), beside a mutant's budget of ``budget_s`` seconds."""
    detected = mutants[mutants["detected"]]
    figure = Figure(figsize=(12, 3.6), layout="constrained")
    by_schedules, by_seconds = figure.subplots(1, 2)
    _schedules_bars(by_schedules, detected, schedules)
    _seconds_curve(by_seconds, detected, budget_s)
    for ax in (by_schedules, by_seconds):
        ax.grid(True, alpha=0.3)
    figure.suptitle(f"Time to kill: {len(detected)} detected mutant(s)")
    return figure


def _schedules_bars(ax: Axes, detected: pd.DataFrame, schedules: int) -> None:
    """One bar per count of schedules judged until the kill, 0 to ``schedules``."""
    # Every count from 0 to the hunt's budget of schedules: a budget unused shows as empty bars.
    counts = detected["schedules"].astype(int).value_counts().reindex(range(schedules + 1),
                                                                      fill_value=0)
    ax.bar(counts.index, counts.to_numpy(), color=BAR_COLOUR)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("schedules judged until the kill (0: the fault-free run)")
    ax.set_ylabel("detected mutants")
    ax.set_title("Schedules to kill")


def _seconds_curve(ax: Axes, detected: pd.DataFrame, budget_s: float) -> None:
    """The share of ``detected`` killed within each wall time, a step per
    mutant, and a dashed line at the budget."""
    seconds = sorted(detected["seconds"])
    ax.step(seconds, [(rank + 1) / len(seconds) * 100 for rank in range(len(seconds))],
            where="post", color=BAR_COLOUR)
    ax.axvline(budget_s, color="#a00", linestyle="--", label="a mutant's budget")
    ax.set_xscale("log")
    # From a tenth of a second to past the budget: decades to read the kills against.
    ax.set_xlim(min([0.1, *seconds]), max([budget_s, *seconds]) * 1.3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("wall time of the hunt (s, log scale)")
    ax.set_ylabel("% of detected mutants killed")
    ax.set_ylim(0, 105)
    ax.set_title("Seconds to kill")
    ax.legend(loc="lower right", fontsize=8)


def time_to_kill_line(mutants: pd.DataFrame) -> str | None:
    """One line on the detected ``mutants``: the median schedules and
    seconds to kill, and the slowest kill with its mutant's number; None
    when none was detected."""
    detected = mutants[mutants["detected"]]
    if detected.empty:
        return None
    slowest = detected.loc[detected["seconds"].idxmax()]
    return (f"median: {detected['schedules'].median():g} schedule(s), "
            f"{detected['seconds'].median():.2f} s; slowest: {slowest['seconds']:.2f} s "
            f"(mutant {int(slowest['number'])})")


# ------------------------------------------------------------------ survivors


def survivor_classes(mutants: pd.DataFrame, meanings: Mapping[str, str]) -> str:
    """Markdown: one bullet per survivor class of ``meanings``, in its order,
    with how many of ``mutants`` survived as it and what it means."""
    survived_as = mutants.loc[~mutants["detected"], "survived_as"]
    return "\n".join(f"- **{name}**: {int((survived_as == name).sum())}. {meaning}"
                     for name, meaning in meanings.items())


def survivor_table(mutants: pd.DataFrame) -> pd.DataFrame:
    """One row per mutant not detected, indexed by its number: where the
    change is (``script:line``), the change, its class, the probe's detail,
    and the schedules its hunt judged (empty when it was not hunted)."""
    survivors = mutants[~mutants["detected"]]
    return survivors.assign(where=survivors["script"] + ":" + survivors["line"].astype(str),
                            schedules=survivors["schedules"].astype("Int64"))[
        ["number", "where", "change", "survived_as", "probe_detail", "schedules"]].rename(
        columns={"survived_as": "class", "probe_detail": "probe detail"}).set_index("number")

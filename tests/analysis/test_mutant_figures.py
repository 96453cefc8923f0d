"""The checker-power notebook's figures and tables: kill rates, time to kill
and the survivors, drawn from a hand-made campaign whose counts can be
checked by hand."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from simulator.analysis import figure_png, mutant_figures  # noqa: E402
from simulator.mutate.campaign import SURVIVOR_CLASSES, MutantRow, as_records  # noqa: E402
from simulator.mutate.page import SURVIVOR_MEANING  # noqa: E402
from simulator.mutate.table import kill_rates  # noqa: E402

SCHEDULES, BUDGET_S = 4, 30.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def row(number: int, where: str, operator: str, probe: str, **fields) -> MutantRow:
    """One mutant of the lease limiter at ``script:line`` ``where``."""
    script, line = where.split(":")
    return MutantRow(number, f"axond_leases.redis.mutant.{number:04d}", script, int(line),
                     operator, f"{operator}: change {number}", f"diff {number}", probe,
                     f"detail of {number}", **fields)


def hand_made_rows() -> list[MutantRow]:
    """Two relational mutants detected, one on the fault-free run (0 schedules);
    a call removed that differed and survived the hunt; and one survivor of
    each other class, never hunted."""
    return [
        row(1, "acquire:31", "relational", "differs", detected=True, schedules=0, seconds=0.4,
            invariants="concurrency_excess_lease_seconds"),
        row(2, "acquire:35", "relational", "differs", detected=True, schedules=3, seconds=2.5,
            invariants="concurrency_excess_lease_seconds, leaked_lease_seconds"),
        row(3, "release:12", "call_removed", "differs", survived_as="undetected",
            schedules=SCHEDULES, seconds=BUDGET_S),
        row(4, "acquire:40", "call_removed", "not run", survived_as="not reached",
            reached=False),
        row(5, "release:8", "index", "equivalent", survived_as="equivalent"),
        row(6, "acquire:2", "constant", "stillborn", survived_as="stillborn"),
    ]


def tables(rows: list[MutantRow]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``mutants`` and ``rates`` as the notebook makes them from a campaign's rows."""
    return (pd.DataFrame.from_records(as_records(rows)),
            pd.DataFrame.from_records(kill_rates(rows), columns=["by", "name", "judged",
                                                                 "detected", "kill_rate"]))


def assert_drawn(figure: Figure) -> None:
    """Every panel labelled on both axes, and the figure renders as a PNG."""
    assert isinstance(figure, Figure)
    for ax in figure.axes:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    assert figure_png(figure).startswith(PNG_SIGNATURE)


def test_the_kill_rate_figure_has_a_bar_per_class_and_per_invariant_with_its_counts():
    mutants, rates = tables(hand_made_rows())
    figure = mutant_figures.plot_kill_rates(mutants, rates)
    assert_drawn(figure)
    by_class, by_invariant = figure.axes
    assert figure.get_suptitle() == "Kill rates: 6 mutant(s), 3 judged (reached, not equivalent)"
    assert (by_class.get_title(), by_invariant.get_title()) == ("By operator class",
                                                                "By invariant")
    # Only the judged count: call_removed's not-run mutant and index's equivalent one do not.
    assert [bar.get_width() for bar in by_class.patches] == pytest.approx([0, 100])
    assert [text.get_text() for text in by_class.texts] == ["0/1", "2/2"]
    assert [bar.get_width() for bar in by_invariant.patches] == pytest.approx([200 / 3, 100 / 3])
    assert [text.get_text() for text in by_invariant.texts] == ["2/3", "1/3"]
    assert by_class.yaxis_inverted()  # the first row of the rates on top


def test_the_time_to_kill_figure_counts_schedules_from_the_fault_free_run_and_steps_seconds():
    mutants, _ = tables(hand_made_rows())
    figure = mutant_figures.plot_time_to_kill(mutants, SCHEDULES, BUDGET_S)
    assert_drawn(figure)
    by_schedules, by_seconds = figure.axes
    assert figure.get_suptitle() == "Time to kill: 2 detected mutant(s)"
    # A bar for every count from 0 to the budget; the survivor's 4 schedules are not a kill.
    assert [bar.get_x() + bar.get_width() / 2 for bar in by_schedules.patches] == [0, 1, 2, 3, 4]
    assert [bar.get_height() for bar in by_schedules.patches] == [1, 0, 0, 1, 0]
    step, budget = by_seconds.lines
    assert list(step.get_xdata()) == [0.4, 2.5]
    assert list(step.get_ydata()) == [50, 100]
    assert list(budget.get_xdata()) == [BUDGET_S, BUDGET_S]
    assert by_seconds.get_xscale() == "log"
    assert by_seconds.get_xlim() == pytest.approx((0.1, BUDGET_S * 1.3))
    assert mutant_figures.time_to_kill_line(mutants) == (
        "median: 1.5 schedule(s), 1.45 s; slowest: 2.50 s (mutant 2)")


def test_the_time_to_kill_figure_draws_a_campaign_with_no_kill():
    mutants, _ = tables([r for r in hand_made_rows() if not r.detected])
    figure = mutant_figures.plot_time_to_kill(mutants, SCHEDULES, BUDGET_S)
    assert_drawn(figure)
    assert figure.get_suptitle() == "Time to kill: 0 detected mutant(s)"
    assert [bar.get_height() for bar in figure.axes[0].patches] == [0] * (SCHEDULES + 1)
    assert mutant_figures.time_to_kill_line(mutants) is None


def test_the_survivor_classes_are_counted_in_the_campaigns_order_with_what_each_means():
    mutants, _ = tables(hand_made_rows())
    lines = mutant_figures.survivor_classes(mutants, SURVIVOR_MEANING).splitlines()
    # The notebook passes the meanings alone: their order must be the classes'.
    assert tuple(SURVIVOR_MEANING) == SURVIVOR_CLASSES
    assert lines == [f"- **{name}**: 1. {SURVIVOR_MEANING[name]}" for name in SURVIVOR_CLASSES]


def test_the_survivor_table_has_one_row_per_survivor_with_its_class():
    mutants, _ = tables(hand_made_rows())
    table = mutant_figures.survivor_table(mutants)
    assert list(table.index) == [3, 4, 5, 6]
    assert list(table.columns) == ["where", "change", "class", "probe detail", "schedules"]
    assert list(table["where"]) == ["release:12", "acquire:40", "release:8", "acquire:2"]
    assert list(table["class"]) == ["undetected", "not reached", "equivalent", "stillborn"]
    assert table.loc[3, "schedules"] == SCHEDULES
    assert table["schedules"].isna().tolist() == [False, True, True, True]  # never hunted

"""Notebook 09 (the checker's power) runs a small mutation campaign end to end."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import pandas as pd
from notebook_runner import execute_notebook, figures_of, outputs_of, printed_by, tables_of

NAME = "09_checker_power"
FIGURES = ("kill-rates", "time-to-kill")
# Two operator classes (nine mutants of the lease limiter), two schedules of
# lost replies per judged mutant: seconds of hunting in all.
SMALL_PARAMETERS = {"operators": ["relational", "call_removed"], "schedules": 2,
                    "budget_s": 10.0, "faults": ["lose_reply"]}


def test_the_notebook_runs_a_campaign_and_shows_its_rates_kills_and_survivors(tmp_path: Path):
    root = tmp_path / "results"
    notebook = execute_notebook(NAME, {**SMALL_PARAMETERS, "results_dir": str(root)},
                                tmp_path)
    assert len(figures_of(notebook)) == len(FIGURES)
    for name in FIGURES:
        assert (root / "figures" / f"{name}.png").exists(), name
    campaign = root / "campaign"
    mutants = pd.read_parquet(campaign / "mutants.parquet")
    assert set(mutants["operator"]) == set(SMALL_PARAMETERS["operators"])

    # The summary line it printed is the page's, and counts the table's mutants.
    (summary,) = [line for line in printed_by(notebook).splitlines()
                  if line.startswith("mutate: ") and "judged detected" in line]
    assert summary.startswith(f"mutate: {len(mutants)} mutant(s)")
    assert escape(summary) in (campaign / "mutants.html").read_text()
    detected = int(re.search(r"(\d+) of \d+ judged detected", summary).group(1))
    assert detected == int(mutants["detected"].sum()) > 0

    # The survivors: each class with what it means, each survivor in the table.
    markdown = "\n".join(output["data"]["text/markdown"]
                         for output in outputs_of(notebook, "display_data")
                         if "text/markdown" in output["data"])
    assert "Strengthen the scenario" in markdown and "the lab's own gap" in markdown
    survivors = mutants[~mutants["detected"]]
    assert set(survivors["survived_as"]) <= {"not reached", "equivalent", "undetected",
                                             "stillborn"}
    hunted = mutants[mutants["survived_as"] != "stillborn"]
    assert hunted["reached"].notna().sum() == (~hunted["detected"]).sum()
    # Reach beside power: the mutants no run reached, then every survivor.
    reach_table, table = tables_of(notebook)
    hunted = mutants[mutants["survived_as"] != "stillborn"]
    not_reached = hunted[hunted["survived_as"] == "not reached"]
    assert (f"reach: {len(hunted) - len(not_reached)} of {len(hunted)} compiling mutants' "
            "lines reached") in printed_by(notebook)
    for _, row in not_reached.iterrows():
        assert escape(row["change"], quote=False) in reach_table
    for _, row in survivors.iterrows():
        assert escape(row["change"], quote=False) in table

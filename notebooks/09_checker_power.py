# ---
# jupyter:
#   jupytext:
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The checker's power: how many generated bugs does the lab catch?
#
# **Question: if the store's Lua had a bug nobody chose, one changed token,
# would the lab's invariants notice, how fast, and where are they blind?**
#
# The race reports and the rediscovery bench measure the lab against bugs
# someone once wrote. A *mutation campaign* (`.venv/bin/python -m simulator mutate
# SCENARIO`, `simulator.mutate`) measures it against bugs nobody chose: it
# generates *mutants* of the scenario's store kind, each its real Lua
# scripts with one token changed (a comparison shifted or flipped, `+` made
# `-`, a constant moved by one, a `redis.call` removed, a TTL halved, a
# `KEYS`/`ARGV` index swapped, a loop bound brought in, an early `return`
# taken). Each mutant is first *probed*: the script calls the scenario's
# fault-free run sent are replayed on fresh fakeredis servers, on the base
# scripts and on the mutant's, and every reply and key compared (the
# probe's finding stays in the table). Then every mutant that compiles is
# *hunted*: the scenario without faults, then a search for a fault schedule
# that makes the mutant worse than the unmutated kind on one of the
# family's invariants (as `hunt --reference BASE`), every run recording the
# store lines it reached (`simulator.reach`).
#
# **What a kill rate measures.** A mutant is *detected* (killed) when a
# schedule (the fault-free one included) makes it worse than the unmutated
# kind beyond the noise margin, or makes it raise. The kill rate is detected
# out of judged: every mutant that compiles, less those no run of its hunt
# reached (*not reached*) and those whose every run was the base's
# (*equivalent*). Per operator
# class it says which kinds of bug the checks see; per invariant, the share
# of judged mutants each invariant caught (one mutant may count for
# several), which says which checks carry the weight. A rate is of this
# scenario and these options: a richer workload or a longer hunt can only
# raise it.
#
# **How to read survivors.** A mutant that is not detected survived as one
# of four classes:
#
# - *stillborn*: its script does not compile; Redis would refuse it, nothing
#   to do;
# - *not reached*: no run of its hunt, with or without faults, executed the
#   mutated line, so no check could see it: **strengthen the scenario** (a
#   workload, a setting or a fault kind that reaches that line);
# - *equivalent*: the line ran, yet every run of its hunt had the base's
#   trace, replies and keys: an equivalent mutant, or runs too plain to tell
#   it apart; read its diff;
# - *undetected*: a run reached it and behaved differently, and no
#   invariant caught it in the hunt: **the lab's own gap**, a metric or a
#   contract it lacks (or a hunt too short to reach the schedule that shows
#   it).
#
# The campaign runs live here, on the lease family's rediscovery scenario
# (`data/scenarios/hunt/axond-leases.toml`, the fixed `axond_leases.redis`)
# with a few operator classes; it is deterministic, so the same parameters
# give the same mutants and verdicts on every machine. Beside its runs it
# writes what `mutate` writes: `mutants.parquet`, `kill_rates.parquet`, and
# `mutants.html`, a page with every mutant's diff. Figures are also written
# as PNG under `results_dir/figures/`.

# %% tags=["parameters"]
scenario_file = "data/scenarios/hunt/axond-leases.toml"  # relative to the lab's checkout
operators = ["relational", "call_removed", "index"]  # operator classes (simulator.mutate.lua)
schedules = 10  # the hunt's fault schedules per judged mutant (besides the fault-free run)
budget_s = 30.0  # a mutant's wall-time cap in seconds, search and shrinking
faults = ["lose_request", "lose_reply", "slow_reply", "crash", "pause"]  # what the hunts draw
max_faults = 3  # faults per schedule at most
seed = 1  # the hunts' seed
results_dir = None  # None: data/results/notebooks/09_checker_power
workers = 1  # processes per hunt

# %%
# ruff: noqa: E402 -- a notebook imports after its parameters cell, which papermill overrides
import pandas as pd
from IPython.display import Markdown, display

from simulator.analysis import (
    figures_dir,
    kept_figure,
    lab_path,
    mutant_figures,
    notebook_results_dir,
)
from simulator.mutate.campaign import Options, as_records, run_campaign
from simulator.mutate.page import SURVIVOR_MEANING
from simulator.mutate.table import kill_rates, summary_line, write_tables

root = notebook_results_dir("09_checker_power", results_dir)
figures = figures_dir(root)  # each figure is also kept there as a PNG
options = Options(operators=tuple(operators), schedules=schedules, seconds=budget_s,
                  faults=tuple(faults), max_faults=max_faults, seed=seed, workers=workers)
rows = run_campaign(lab_path(scenario_file), options, root / "campaign", echo=print)
written = write_tables(rows, root / "campaign")
mutants = pd.DataFrame.from_records(as_records(rows))
rates = pd.DataFrame.from_records(kill_rates(rows), columns=["by", "name", "judged",
                                                             "detected", "kill_rate"])
print(summary_line(rows))
print(f"written: {', '.join(str(path) for path in written)}")

# %% [markdown]
# ## Kill rates by operator class and by invariant
#
# Left: per operator class, the share of its judged mutants the lab
# detected, with detected/judged beside each bar. Right: per invariant, the
# share of all judged mutants it detected. A class at 100% is one whose
# every observable mutant some invariant flagged; an invariant with a short
# bar is not useless, it may be the only one that sees its kind of bug.

# %%
display(kept_figure(mutant_figures.plot_kill_rates(mutants, rates), figures, "kill-rates",
                    "The share of judged mutants the lab detected, per operator class and "
                    "per invariant."))

# %% [markdown]
# ## Reach beside power
#
# A kill rate says how often the checks caught a change the runs reached; the
# reach says how much of the store the runs reached at all. Every mutant
# that compiles was hunted, every run recording the store lines it executed:
# the share of mutants whose line a run reached, and those no run did (the
# scenario's gap, left out of the kill rate and counted here). The campaign's
# union of store lines reached is the last line it printed above.

# %%
hunted = mutants[mutants["survived_as"] != "stillborn"]
not_reached = hunted[hunted["survived_as"] == "not reached"]
print(f"reach: {len(hunted) - len(not_reached)} of {len(hunted)} compiling mutants' lines "
      f"reached by a run of their hunt; kill rate: {int(hunted['detected'].sum())} detected "
      f"of {len(hunted) - len(not_reached) - int((hunted['survived_as'] == 'equivalent').sum())}"
      " judged")
with pd.option_context("display.max_colwidth", None):
    display(not_reached[["number", "script", "line", "change"]].set_index("number"))

# %% [markdown]
# ## Time to kill
#
# How much hunting a detected mutant took. Left: the fault schedules the
# hunt judged up to the one that exposed it, that one included (0: the
# fault-free run already did: the bug shows without any fault). Right: the
# share of detected mutants killed within a wall time (the hunt's, its
# shrinking included; log scale). Mutants found only after many schedules
# are the ones a shorter hunt, or a smaller `schedules` in CI, would miss.

# %%
display(kept_figure(mutant_figures.plot_time_to_kill(mutants, schedules, budget_s), figures,
                    "time-to-kill",
                    "How many schedules and how many seconds of hunting each detected mutant "
                    "took."))
kill_times = mutant_figures.time_to_kill_line(mutants)
if kill_times is not None:
    print(kill_times)

# %% [markdown]
# ## The survivors
#
# Each class with its count and what it asks of you, then every survivor:
# where the change is, its class, and the probe's detail (for a mutant that
# differed, the first call or key where it did). Start with the
# *undetected*: each is a bug the lab would ship. Then the *not reached*:
# each is a line no run of the scenario, under any fault drawn, exercised.
# The page `mutants.html` beside the tables has every mutant's diff.

# %%
display(Markdown(mutant_figures.survivor_classes(mutants, SURVIVOR_MEANING)))
with pd.option_context("display.max_colwidth", None):  # a change or a detail cut is unreadable
    display(mutant_figures.survivor_table(mutants))

# %% [markdown]
# ## Caveats
#
# - A kill rate is of one scenario. The default one runs 3 s with 5 s
#   leases, so no lease expires in its fault-free run and the mutants of the
#   acquire script's expiry branch are *not reached* unless a fault strands
#   a lease; a longer run, or shorter leases, would judge them.
# - The hunt's `schedules` and `budget_s` bound each judged mutant: an
#   *undetected* mutant may be caught by a longer hunt (more schedules, more
#   fault kinds). Raise them before calling a survivor the lab's gap.
# - An *equivalent* mutant was the base in every run of its hunt: a longer
#   hunt may still draw a schedule where it is not.
# - Only Lua is mutated (stores running on Redis); Python store code is not.

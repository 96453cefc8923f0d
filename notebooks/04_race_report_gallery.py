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
# # The race-report gallery
#
# **Question: does every race in the catalogue still break its historical
# store, exactly as recorded, and does the fixed store survive the very same
# run?**
#
# Each race report in `data/races/` is one broken invariant, written down so
# anyone can replay it: a scenario, a seed, an explicit fault schedule, the
# changes that make the store the broken *variant*, and those that make it the
# *fixed* store. This notebook replays every report twice, as
# `.venv/bin/python -m simulator replay REPORT` and `... --against fixed` do:
#
# - on the **variant**: REPRODUCED when the invariant's `broken_when`
#   condition holds, with the metric's value, and whether the run's trace is
#   the one recorded beside the report (its fingerprint); if not, the first
#   event where the two part;
# - on the **fixed store**, with the same scenario, seed and schedule: HOLDS
#   when the invariant is kept.
#
# **How to read the figures.** One figure per report: the variant's timeline
# on the left, the fixed store's on the right, each titled with its verdict
# (red: the invariant is broken; green: it holds). In each timeline the top
# panel has one lane per replica the fault schedule hit (or, when none is
# named, the replicas serving the keys whose record strays furthest): a green
# bar is a request from its reserve to its settlement, grey a denial, red dots
# and crosses are lost replies and requests, black ticks timeouts, and dotted
# purple lines the injected faults and migrations. The bottom panel is the
# spend of the keys involved: the true spend (red), what the store recorded
# (blue), and recorded plus live holds (dotted blue: what the store counts
# against the cap). A race shows as the blue line leaving the red one on the
# left and not on the right (or, for a wedged cap, as grey denials). The
# table at the end sums up the catalogue. Each side-by-side figure is also
# written as a PNG under `results_dir/figures/`.

# %% tags=["parameters"]
reports = None        # None: every report in data/races; or a list of report names
backend = None        # None: each report's own backend (fakeredis); or "redis://HOST:PORT/DB"
results_dir = None    # None: data/results/notebooks/04_race_report_gallery
workers = None        # replays at once, in processes (None: one per core; 1: in this kernel)

# %%
# ruff: noqa: E402  (a notebook imports after its papermill parameters cell)

from IPython.display import Markdown, display

from simulator.analysis import figures_dir, kept_figure, notebook_results_dir
from simulator.analysis.gallery import (
    entry_markdown,
    gallery_conclusion,
    report_paths,
    run_gallery,
    side_by_side,
    summary_table,
)

out_dir = notebook_results_dir("04_race_report_gallery", results_dir)
figures = figures_dir(out_dir)  # each side-by-side figure is also kept there as a PNG
paths = report_paths(reports)
print(f"{len(paths)} race report(s): {', '.join(path.stem for path in paths)}")
print(f"timelines are written to {out_dir}")

# %% [markdown]
# ## Replaying every report, on its variant and on the fixed store
#
# Each report is replayed twice (processes run side by side when `workers`
# allows). A replay depends only on the report, so the verdicts below are the
# same on every machine; only the time it takes differs.

# %%
entries = run_gallery(paths, out_dir, workers=workers, backend=backend, progress=print)

# %% [markdown]
# ## The gallery
#
# For each report: its title, the invariant, the story as the report tells
# it, both verdicts, and the two timelines side by side.

# %%
for entry in entries:
    display(Markdown(entry_markdown(entry)))
    display(kept_figure(side_by_side(entry), figures, entry.name,
                        f"Race report {entry.name}: the timeline of its replay on the variant "
                        "beside the one on the fixed store."))

# %% [markdown]
# ## The catalogue at a glance
#
# One row per report: `reproduced` (the variant still breaks the invariant),
# `fingerprint ok` (the variant's trace is the one recorded beside the
# report; empty when the report records none), `fixed store holds` (the
# fixed store keeps the invariant under the same run), and the invariant's
# metric on each side. What the table says, computed from it, follows.

# %%
display(summary_table(entries))
display(Markdown(gallery_conclusion(entries)))

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
# # Conservation drift over time, per cause
#
# **The question.** When does a budget store's record of spend stop matching
# what was really spent, by how much, and why? *Conservation drift* is the
# store's recorded spend minus the true spend (`docs/metrics.md`): negative
# when spend never reached the record, positive when it was recorded twice.
# The lab's oracle splits it, at every metrics sample, over the causes of
# `simulator.families.axond_budget.causes.DRIFT_CAUSES`: a settlement still on its way
# (*settlement in flight*, transient), a settlement that never arrived
# (*settlement lost*), a settle that ran twice (*duplicate execution*), spend
# a server restart or failover took away (*server data loss*), an evicted key
# (*eviction*), a replica's own ledger lost with it (*replica crash*), a
# migration the lab interrupted (*migration interrupted*), and whatever no
# fault of the lab's explains (*store logic*: the store's own doing, zero for
# the shipped stores).
#
# Three mechanisms, one sweep each over `data/scenarios/drift-base.toml` (the
# v1 Redis store, 50 replicas, budgets far above the demand so every request
# runs and settles):
#
# * **(a) lost settlements**: commands lost on their way to the server
#   (`network.request_loss`); a lost settle never runs
#   (`data/sweeps/drift-lost-settlements.toml`);
# * **(b) duplicate execution**: 3% of replies lost, and the driver re-sends
#   a command whose reply timed out (`network.retries.count`); a re-sent
#   settle whose first reply was lost runs twice
#   (`data/sweeps/drift-duplicate-execution.toml`);
# * **(c) server data loss**: the server restarts at a rate
#   (`faults.server_restart.rate`, down 500 ms each time) and comes back with
#   what its persistence model kept (`server.persistence`: none, rdb every
#   5 s, aof-everysec, aof-always; `data/sweeps/drift-persistence.toml`).
#
# **How to read the figures.** Each drift-over-time panel stacks the causes
# in US dollars: causes that added spend above zero, causes that lost it
# below, and the total drift as a black line (the sum of both sides). The
# panels of one figure share their y scale. The last figure gives the final
# drift by persistence model as a percentage of the true spend, with its
# spread over seeds. Every figure is also written as a PNG under
# `results_dir/figures/`.

# %% tags=["parameters"]
mechanisms = ["lost_settlements", "duplicate_execution", "server_data_loss"]
seeds = None  # seeds per point (a count: seeds 1..N); None: each sweep file's own
set_fields = {}  # scenario fields set at every point of every sweep, e.g. {"duration": "3s"}
vary = {}  # per mechanism, values replacing its sweep's, e.g. {"lost_settlements": {...}}
series_seed = 1  # the run whose drift over time is drawn; None: the mean over seeds
results_dir = None  # None: data/results/notebooks/03_conservation_drift
workers = None  # local worker processes (None: one per core)

# %%
# ruff: noqa: E402 -- a notebook imports after its parameters cell, which papermill overrides
# %matplotlib inline

from IPython.display import display

from simulator.analysis import figures_dir, kept_figure, notebook_results_dir
from simulator.analysis.drift import (
    RESTART_RATE,
    cause_checks,
    drift_over_time_figure,
    drift_sweeps,
    final_drift_table,
    highest_restart_rate,
    persistence_figure,
    run_drift_sweeps,
)

results_dir = notebook_results_dir("03_conservation_drift", results_dir)
figures = figures_dir(results_dir)  # each figure is also kept there as a PNG
sweeps = drift_sweeps(mechanisms, seeds=seeds, set_fields=set_fields, vary=vary)
for name, sweep in sweeps.items():
    print(f"{name}: {len(sweep.points)} points x {len(sweep.seeds)} seeds, varying "
          f"{', '.join(sweep.parameters)}")
runs = run_drift_sweeps(sweeps, results_dir, workers=workers)
print(f"results under {results_dir}")

# %% [markdown]
# ## (a) Lost settlements
#
# A settle command lost on its way never runs: the request's spend is never
# recorded, and the hold it should have released expires on its own deadline.
# Drift goes negative by the actual spend of each such request and stays
# there. The thin band of *settlement in flight* is the normal lag between a
# request finishing its work and its settle landing; it closes by the end of
# the drain. (A replica crash loses a settlement too, but only when it falls
# between the end of a request's work and the arrival of its settle, one
# round trip; work a crash cuts short spends nothing in the lab's model.
# Lost requests are the common way.)

# %%
if "lost_settlements" in runs:
    display(kept_figure(
        drift_over_time_figure(runs["lost_settlements"], seed=series_seed,
                               title="(a) Drift from lost settlements"),
        figures, "drift-lost-settlements",
        "The recorded spend's drift from the true spend over virtual time, by cause, "
        "as more requests are lost."))
    display(final_drift_table(runs["lost_settlements"]))

# %% [markdown]
# ## (b) Duplicate execution
#
# The settle script charges every time it runs (a settle for an expired hold
# must still charge: the spend happened). So when a settle's reply is lost
# and the driver re-sends it, the spend is charged twice: drift goes
# *positive*. With no retries a lost reply costs nothing here: the settle
# already ran. One retry already charges every settle whose reply was lost;
# more retries add only the settles whose retried reply was lost as well.

# %%
if "duplicate_execution" in runs:
    display(kept_figure(
        drift_over_time_figure(runs["duplicate_execution"], seed=series_seed,
                               title="(b) Drift from duplicate execution"),
        figures, "drift-duplicate-execution",
        "The recorded spend's drift from the true spend over virtual time, by cause, "
        "as the driver re-sends more commands whose reply timed out."))
    display(final_drift_table(runs["duplicate_execution"]))

# %% [markdown]
# ## (c) Server data loss, per persistence model
#
# At each restart the server comes back with what its persistence model
# kept; the spend recorded since then is gone from the record (a step down
# at the restart), while the truth keeps it. Settlements sent while the
# server is down are refused and lost too (*settlement lost*), whatever the
# persistence model. The panels show the highest restart rate of the sweep.

# %%
if "server_data_loss" in runs:
    rate = highest_restart_rate(runs["server_data_loss"])
    where = {RESTART_RATE: rate} if rate is not None else None
    display(kept_figure(
        drift_over_time_figure(runs["server_data_loss"], seed=series_seed, where=where,
                               title="(c) Drift from server restarts"),
        figures, "drift-server-restarts",
        "The recorded spend's drift from the true spend over virtual time, by cause, "
        "for each persistence model at the highest restart rate."))

# %% [markdown]
# ### Final drift by persistence model
#
# Left: what the restarts took from the record (*server data loss*), as a
# percentage of the true spend, for each persistence model and restart rate
# (median over seeds, bar from the 10th to the 90th percentile). Right:
# every cause of the final drift at the highest restart rate, mean over
# seeds.

# %%
if "server_data_loss" in runs:
    display(kept_figure(persistence_figure(runs["server_data_loss"]), figures,
                        "drift-by-persistence",
                        "Server data loss as a share of the true spend for each persistence "
                        "model and restart rate, and every cause of the final drift."))
    display(final_drift_table(runs["server_data_loss"]))

# %% [markdown]
# ## Does each cause show up where expected?
#
# Computed from the final drift of every run (summed over seeds): each
# mechanism must produce its own cause at its strongest setting and none at
# its baseline; `none` must lose the most and `aof-always` nothing. A check
# that does not hold is printed as such: with few seeds or short runs a
# mechanism may simply not have fired.

# %%
checks = cause_checks(runs)
display(checks)
for row in checks.itertuples(index=False):
    verdict = "holds" if row.holds else "DOES NOT HOLD"
    print(f"- {row.mechanism}: {row.expected} ({row.cause}: "
          f"{row.drift_microdollars:,} µ$) -> {verdict}")

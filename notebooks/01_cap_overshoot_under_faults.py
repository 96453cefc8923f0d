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
# # Cap overshoot under faults
#
# **The question.** As gateway replicas crash more often and more replies
# are lost, how far past its cap does a budget store let the fleet spend, and
# why? The lab runs the real stores (the v1 and v2 Redis layouts, and
# optionally the per-replica in-memory ledgers) over one base scenario,
# `data/scenarios/overshoot-under-faults.toml` (50 replicas, 20 subject
# budgets that bind: a hot subject's demand is several times its cap), on a
# grid of faults: the replica crash rate (`faults.crash.rate`, per replica,
# each crashed replica restarting after 5 s), the reply-loss rate
# (`network.reply_loss`), and what the store does when a call gets no answer
# (`store_settings.on_unavailable`: **deny**, fail closed, or **allow**,
# fail open). One sweep file per store and fault axis
# (`data/sweeps/overshoot-vs-faults-*.toml`, the other fault off), since the
# v2 store needs a namespace cap (set to the sum of its subjects' caps, so
# both layouts enforce the same limits).
#
# **How to read the figures.** *Overshoot* is `max(0, true spend − cap)` per
# subject (`docs/metrics.md`). The headline plots the worst subject's
# overshoot as a percentage of its cap (`cap_overshoot_max_ratio`) against
# each fault axis, with the other fault off: the median over seeds, shaded
# from the 10th to the 90th percentile. The stacked figure splits the
# overshoot of all subjects over its causes (`cap_overshoot_by_<cause>_microdollars`),
# averaged over seeds and normalised as the figure's axis says (by default
# as a percentage of the summed caps of the subjects that saw traffic). The
# in-memory store enforces its cap *per replica*: the fleet may spend about a
# cap per replica serving a subject, so its overshoot is by design; it has
# its own figure and is never drawn beside the fleet-wide stores. The last
# figure shows what the faults cost in false denials (refusals the truth had
# room for), which is where a fault that causes no overshoot shows its price.
# Every figure is also written as a PNG under `results_dir/figures/`.

# %% tags=["parameters"]
stores = ["axond_budget.redis_v1", "axond_budget.redis_v2", "axond_budget.in_memory"]
seeds = None  # seeds per point (a count: seeds 1..N); None: each sweep file's own
set_fields = {}  # scenario fields set at every point, e.g. {"duration": "3s"}
vary = {}  # replace a sweep's values, e.g. {"network.reply_loss": [0.0, 0.1]}
per = "total_cap"  # overshoot per "total_cap" (% of the summed caps) or "admissions"
results_dir = None  # None: data/results/notebooks/01_cap_overshoot_under_faults
workers = None  # local worker processes (None: one per core)

# %%
# ruff: noqa: E402 -- a notebook imports after its parameters cell, which papermill overrides
# %matplotlib inline

from IPython.display import display

from simulator.analysis import figures_dir, kept_figure, notebook_results_dir
from simulator.analysis.overshoot import (
    CRASHES,
    POLICY,
    REPLY_LOSS,
    causes_figure,
    describe_findings,
    false_denials_figure,
    findings,
    headline_figure,
    overshoot_sweeps,
    per_replica,
    per_replica_figure,
    run_overshoot_sweeps,
)

results_dir = notebook_results_dir("01_cap_overshoot_under_faults", results_dir)
figures = figures_dir(results_dir)  # each figure is also kept there as a PNG
sweeps = overshoot_sweeps(stores, seeds=seeds, set_fields=set_fields, vary=vary)
for name, sweep in sweeps.items():
    print(f"{name}: {len(sweep.points)} points x {len(sweep.seeds)} seeds, varying "
          f"{', '.join(sweep.parameters)}")
frame = run_overshoot_sweeps(sweeps, results_dir, workers=workers)
print(f"{len(frame)} runs; results under {results_dir}")

# %% [markdown]
# How many runs each store has per fault setting, and whether the caps bind
# at all: a fleet-wide store with no denials for budget would say nothing
# about overshoot.

# %%
display(frame.groupby(["store", POLICY, CRASHES, REPLY_LOSS], dropna=False).agg(
    runs=("seed", "count"),
    denied_for_budget=("requests_denied_exceeded", "mean"),
    admitted=("requests_admitted", "mean"),
    keys_over_cap=("keys_over_cap", "mean"),
).reset_index())

# %% [markdown]
# ## The headline: the worst subject's overshoot as faults grow
#
# Left, against the crash rate with no reply lost; right, against the
# reply-loss rate with no crash. Solid lines fail closed, dashed lines fail
# open. A line that stays at zero means the store kept every subject within
# its cap at every fault rate tried.
#
# What to expect, from how the lab models these faults. A crash aborts the
# requests in flight on that replica: their unfinished work spends nothing,
# and their holds stay until the TTL reclaims them, so a crash by itself
# blocks budget rather than overspending it; it loses spend only when it
# falls between the end of a request's work and the arrival of its
# settlement (one round trip). A lost reply to a *reserve* leaves a hold the
# replica never learns about; a store that fails closed then refuses the
# request, while one that fails open admits it with nothing held, which the
# store can no longer count against the cap (*fail-open admission*). A lost
# reply to a *settle* costs nothing: the settle ran.

# %%
display(kept_figure(headline_figure(frame), figures, "headline",
                    "The worst subject's cap overshoot of each store against the crash rate "
                    "and against the reply-loss rate, failing closed and failing open."))

# %% [markdown]
# ## Why: overshoot stacked by cause
#
# One row per fleet-wide store; one column per fault axis and unavailable
# policy; one y scale for every panel, so an empty panel is a real zero. The
# causes are those of `simulator.families.axond_budget.causes.CAUSES`:
# *estimate underrun* (a request spent more than it reserved), *fail-open
# admission* (the store was unreachable and the policy let the request in
# unheld), *settlement lost* (spend that never reached the record, once the
# hold that stood in for it expired), and so on; *store logic* is what no
# fault of the lab's explains (zero for the shipped stores). In a run with
# several causes at once the split is mechanistic, not counterfactual
# (`docs/metrics.md`; `run --counterfactual` gives the other view).

# %%
display(kept_figure(causes_figure(frame, per=per), figures, "overshoot-by-cause",
                    "Each fleet-wide store's cap overshoot stacked by cause, per fault axis "
                    "and unavailable policy, on one y scale."))

# %% [markdown]
# ## Per-replica ledgers, apart
#
# Each replica of the in-memory store keeps its own ledger and enforces the
# cap on it alone (`cap_enforced_per = "replica"`): the fleet as a whole can
# spend about a cap per replica that serves a subject. Its overshoot against
# the fleet-wide cap is the design, not a fault (cause *per-replica ledger*).
# A crash wipes that replica's ledger; the spend it forgets is *server data
# loss*.

# %%
if per_replica(frame).empty:
    print("no per-replica store in `stores`: nothing to show here")
else:
    display(kept_figure(per_replica_figure(frame, per=per), figures, "per-replica-ledgers",
                        "The per-replica store's overshoot against the fleet-wide cap, "
                        "by cause, as faults grow."))

# %% [markdown]
# ## What the faults cost instead: false denials
#
# A crashed replica's holds, and the holds of reserves whose replies were
# lost, keep counting against the cap until their TTL passes; a fail-closed
# store also refuses the requests whose reserve got no answer. Both show up
# as false denials: refusals an ideal limiter, knowing the truth, would not
# have made.

# %%
display(kept_figure(false_denials_figure(frame), figures, "false-denials",
                    "False denials of each store (refusals the truth had room for) as "
                    "crashes and lost replies grow."))

# %% [markdown]
# ## What this run shows
#
# Computed from the runs above (mean over seeds, the other fault off; the
# first rows are the fleet-wide stores). A store whose overshoot "stays
# flat" kept the cap along that axis; where it grows, the named cause is the
# largest share of the overshoot at the highest fault rate.

# %%
table = findings(frame, per=per)
display(table)
for sentence in describe_findings(table, per=per):
    print("-", sentence)

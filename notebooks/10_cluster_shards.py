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
# # A Redis Cluster's shards: what a failover costs, and how hot a shard runs
#
# **The question.** The stores run on Redis Cluster in production: each
# key lives in one of 16,384 hash slots, each slot on one primary, and a
# primary that fails is replaced by its replica, which may lack its last
# writes. **What does one shard's failover cost each store, against how far
# its replica lagged? And how much of the work lands on one shard?**
#
# - **A failover's cost.** The promoted replica lacks the last `lag` of
#   the shard's writes: the budget store loses settlements (spend never
#   recorded: *drift*, and room admitted twice: *overshoot*) and brings back
#   holds already released (*leaked holds*); the concurrency limiter loses
#   leases just granted (*concurrency excess*) and brings back leases already
#   released (*leaked leases*, and the *false denials* they cause). A
#   failover costs only the stores whose keys that shard holds.
# - **The hot shard.** The v2 budget layout keeps all of a namespace's keys
#   under one `{namespace}` hash tag, so one slot, one shard (ADR 0010: one
#   script can charge subject and namespace together without a `CROSSSLOT`
#   error); v1 tags each subject's keys `{namespace|subject}`, which spreads a
#   namespace's subjects over the shards.
#
# Four sweeps on a simulated three-shard cluster (`[server] cluster`, each
# shard a node of its own) answer it: `data/sweeps/shard-failover-budget.toml`
# and `data/sweeps/shard-failover-leases.toml` (one failover of shard 0, 1
# or 2, its replica 0 to 3 s behind, no other fault), and
# `data/sweeps/shard-hot-namespace-v1.toml` / `-v2.toml` (a fault-free fleet,
# 1 to 300 subjects in one or four namespaces, uniformly picked). The runs
# on a real throwaway cluster (`--backend redis-cluster`) give the same
# numbers (`tests/simulator/test_cluster_real.py`).
#
# **How to read the figures.** A line is the median over seeds and the band
# around it spans the 10th to 90th percentile of the seeds. Every number
# printed under a figure is computed from the same runs by
# `simulator.analysis.shards`.
#
# Change the parameters below to ask about your own cluster: the lags, the
# shards hit, the subjects and namespaces, and any scenario field
# (`set_fields`). Finished runs are kept and reused (one folder per
# configuration under `results_dir`), and every figure is also written as a
# PNG under `results_dir/figures/`.

# %% tags=["parameters"]
failover_sweep_files = {"axond_budget": "data/sweeps/shard-failover-budget.toml",
                        "axond_leases": "data/sweeps/shard-failover-leases.toml"}
hot_sweep_files = ["data/sweeps/shard-hot-namespace-v1.toml",
                   "data/sweeps/shard-hot-namespace-v2.toml"]
seeds = None  # None: the sweep files'; a count N (seeds 1..N) or a list of seeds
lags = None  # None: the failover sweeps'; the replica's lag, e.g. ["0s", "1s"]
shards_hit = None  # None: the failover sweeps'; shards whose failover is run, e.g. [0, 1]
subjects = None  # None: the hot-shard sweeps'; subjects in all, e.g. [10, 1000]
namespaces = None  # None: the hot-shard sweeps'; e.g. [1, 4]
set_fields = {}  # any other scenario fields, by dotted path, every sweep
results_dir = None  # None: data/results/notebooks/10_cluster_shards
workers = None  # local worker processes (None: one per core)

# %%
# ruff: noqa: E402 -- a notebook imports after its parameters cell, which papermill overrides
from IPython.display import display

from simulator.analysis import figures_dir, kept_figure, notebook_results_dir, shard_figures, shards
from simulator.sweeps import read_results, results_dir_for, run_sweep

root = notebook_results_dir("10_cluster_shards", results_dir)
figures = figures_dir(root)  # each figure is also kept there as a PNG


def table_of(sweep):
    out = results_dir_for(sweep, root)
    outcome = run_sweep(sweep, out, workers=workers)
    print(f"{sweep.name}: {outcome.runs_total} runs ({outcome.already_done} reused from {out})")
    if outcome.failed:
        print("  failed runs (left out of the figures):", outcome.failed)
    return shards.shard_table(read_results(out), sweep)


failover_tables = {
    family: table_of(shards.load_shard_sweep(path, seeds=seeds, set_fields=set_fields,
                                             lags=lags, shards_hit=shards_hit))
    for family, path in failover_sweep_files.items()}
hot = shards.hot_shard_table([
    table_of(shards.load_shard_sweep(path, seeds=seeds, set_fields=set_fields,
                                     subjects=subjects, namespaces=namespaces))
    for path in hot_sweep_files])

# %% [markdown]
# ## What one shard's failover costs the budget store
#
# Each panel: a cost of the run against the promoted replica's lag, one line
# per shard that failed over. The demo's 200 subjects in 5 namespaces spread
# over the three shards by their `{namespace|subject}` tags, so every
# shard's failover costs about a third of what the whole server's would.
#
# What to expect: with no lag the failover still costs the settlements
# refused while the shard was down (its `down_for`), filed as the store
# unavailable; each second of lag then loses a second of that shard's
# settlements (drift, the lab's `data_loss` cause) and lets through
# requests the lost spend had no room for (overshoot); holds released in the
# lost second come back and count until their TTL (leaked holds).

# %%
display(kept_figure(shard_figures.plot_failover(failover_tables["axond_budget"],
                                                "axond_budget"),
                    figures, "failover-budget",
                    "The budget store's drift, cap overshoot and leaked holds against the "
                    "promoted replica's lag, one line per shard that failed over."))
for line in shards.failover_lines(failover_tables["axond_budget"], "axond_budget"):
    print(line)

# %% [markdown]
# ## What one shard's failover costs the concurrency limiter
#
# The limiter's leases all live in one hash (one `{limiter}` tag), so on one
# shard: only that shard's failover costs anything, and the other two
# shards' lines stay at what the run costs with no failover at all.
#
# What to expect: a replica that lags brings back leases their holders
# already released; they hold slots nobody uses until their TTL (leaked
# lease-seconds), and the limiter denies requests the slots had room for
# (false denials). Leases granted in the lost second are forgotten while
# their holders run: the limiter may grant those slots again (concurrency
# excess), which at these loads is rare.

# %%
display(kept_figure(shard_figures.plot_failover(failover_tables["axond_leases"],
                                                "axond_leases"),
                    figures, "failover-leases",
                    "The concurrency limiter's excess, leaked leases and false denials against "
                    "the promoted replica's lag, one line per shard that failed over."))
for line in shards.failover_lines(failover_tables["axond_leases"], "axond_leases"):
    print(line)

# %% [markdown]
# ## How hot the busiest shard runs
#
# The busiest shard's share of the commands every shard ran
# (`busiest_shard_share`), against the subjects in all, for one namespace
# and for four; the dashed line is an even spread over three shards.
#
# What to expect: v2 keeps a namespace on one shard whatever its subjects,
# so one namespace puts nearly all the work on one shard (the remainder is
# the boot's reads of the layout marker), and four namespaces on three
# shards put at least two on one. v1 spreads subjects, and with enough of
# them reaches an even spread. With few subjects it need not: CRC16 is
# linear, and tags that differ in the same digit in the same places
# (`{ns-1|subject-1}`, `{ns-2|subject-2}`...) can all land on one shard,
# as ten subjects in four namespaces do here, on the real cluster as on the
# simulated one.

# %%
display(kept_figure(shard_figures.plot_hot_shard(hot), figures, "hot-shard",
                    "The busiest shard's share of the commands against the subjects, v1 "
                    "beside v2, for one and four namespaces."))
for line in shards.hot_shard_lines(hot):
    print(line)

# %%
display(hot)

# %% [markdown]
# ## Caveats
#
# - A failover here is instant but for its `down_for` (200 ms): a real one
#   takes the cluster's node timeout to detect (seconds), during which the
#   shard refuses writes; set `faults.schedule.0.down_for` to see that cost.
# - One failover per run, at a fixed instant: its cost depends on the load
#   the shard carried in the lost second; more seeds narrow the bands.
# - The simulated shards run unpipelined (the lab keeps the oracle's facts in
#   order across shards); that changes the lab's speed, not these numbers.

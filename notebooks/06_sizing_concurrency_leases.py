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
# # Sizing concurrency leases
#
# **The question.** A gateway fleet shares one concurrency limiter: before a
# request runs, its replica acquires a *lease* in Redis, and the limiter
# refuses once `max_in_flight` leases are live; the lease is released when
# the request ends, or expires after the *lease TTL* if nobody releases it.
# Given the traffic (arrival rate, request durations) and how often replicas
# crash and connections stall, **how many slots, and which lease TTL, should
# a capacity planner choose?**
#
# - **Too few slots**, and requests are refused although the backend could
#   serve them. Without faults, the share refused is the Erlang-B blocking
#   probability B(c, A) of c slots under A Erlangs of offered load (arrival
#   rate × mean request duration), whatever the shape of the durations.
# - **Too short a TTL**, and the lease of a request that is still running
#   expires: the limiter admits another request in its place and more
#   requests run at once than the limit allows (*concurrency excess*).
# - **Too long a TTL**, and the lease of a crashed caller, or one whose
#   release was lost or stalled, keeps its slot until the TTL passes (*leaked
#   lease-seconds*), so live callers are refused although the truth had room.
#
# Two sweeps answer it, both on the lease demo scenario
# (`data/scenarios/leases.toml`: a Redis lease store, one limiter shared by
# hundreds of replicas). The first (`data/sweeps/lease-sizing-erlang.toml`)
# removes every fault and checks the limiter against Erlang-B over limits and
# loads; the second (`data/sweeps/lease-sizing.toml`) keeps the crashes,
# stalled connections and lost replies, and varies the limit and the lease
# TTL. The lab's oracle measures each cost (definitions in `docs/metrics.md`).
#
# **How to read the figures.** On the Erlang-B figure the lines are B(c, A)
# and the markers the simulated denial share (mean over seeds, with bars of
# ± 3 standard errors over seeds). On the TTL figure a line is the median
# over seeds and the band around it spans the 10th to 90th percentile of the
# seeds; green rings mark the recommended points. The last figure is the
# recommended (limit, TTL) region itself: green cells are recommended, grey
# ones name the target they missed.
#
# Change the parameters below to plan for your own traffic: the limits, the
# loads (as arrival processes), the TTLs, the request durations, the crash
# rate, the targets. Finished runs are kept and reused (one folder per
# configuration under `results_dir`), and every figure is also written as a
# PNG under `results_dir/figures/`.

# %% tags=["parameters"]
erlang_sweep_file = "data/sweeps/lease-sizing-erlang.toml"  # relative to the lab's checkout
sizing_sweep_file = "data/sweeps/lease-sizing.toml"
seeds = None  # None: the sweep files'; a count N (seeds 1..N) or a list of seeds
limits = None  # None: the files'; a list of max_in_flight values (both sweeps)
arrivals = None  # None: the files'; offered loads as arrivals, e.g. ["poisson(36/s)"]
lease_ttls = None  # None: the sizing sweep file's; a list of durations, e.g. ["2s", "10s"]
request_duration = None  # None: the scenario's (workload.duration), both sweeps
crash_rate = None  # None: the scenario's (faults.crash.rate per replica), sizing sweep only
set_fields = {}  # any other scenario fields, by dotted path, both sweeps
target_denial_share = 0.05  # at most this share of arrived requests refused
target_leaked_slots = 1.0  # at most this many slots leaked on average over a run
target_excess_slots = 0.0  # at most this many leases above the limit on average over a run
results_dir = None  # None: data/results/notebooks/06_sizing_concurrency_leases
workers = None  # local worker processes (None: one per core)

# %%
# ruff: noqa: E402 -- a notebook imports after its parameters cell, which papermill overrides
from IPython.display import Markdown, display

from simulator.analysis import figures_dir, kept_figure, lease_figures, leases, notebook_results_dir
from simulator.sweeps import read_results, results_dir_for, run_sweep

common = dict(seeds=seeds, limits=limits, arrivals=arrivals)
durations = {} if request_duration is None else {"workload.duration": request_duration}
crashes = {} if crash_rate is None else {"faults.crash.rate": crash_rate}
erlang_sweep = leases.load_lease_sweep(erlang_sweep_file, **common,
                                       set_fields={**set_fields, **durations})
sizing_sweep = leases.load_lease_sweep(sizing_sweep_file, **common, lease_ttls=lease_ttls,
                                       set_fields={**set_fields, **durations, **crashes})
root = notebook_results_dir("06_sizing_concurrency_leases", results_dir)
figures = figures_dir(root)  # each figure is also kept there as a PNG

tables = {}
for sweep in (erlang_sweep, sizing_sweep):
    out = results_dir_for(sweep, root)
    outcome = run_sweep(sweep, out, workers=workers)
    print(f"{sweep.name}: {outcome.runs_total} runs ({outcome.already_done} reused from {out})")
    if outcome.failed:
        print("  failed runs (left out of the figures):", outcome.failed)
    tables[sweep.name] = leases.planner_table(read_results(out), sweep)
erlang_table, sizing_table = tables[erlang_sweep.name], tables[sizing_sweep.name]


display(Markdown(leases.describe_sweep(erlang_sweep)))
display(Markdown(leases.describe_sweep(sizing_sweep)))

# %% [markdown]
# ## The limit: denials against Erlang-B
#
# With no faults, the share of requests refused should follow Erlang-B: left,
# against the limit at each offered load; right, against the load for each
# limit. The dashed red line is the denial-share target. A point whose seeds
# all refused nothing has no spread over seeds and is drawn without a bar.
# Where the markers sit on their curve, the limiter loses requests exactly as
# a loss system of `max_in_flight` servers does, and Erlang-B alone sizes the
# limit for a fault-free fleet.

# %%
comparison = leases.erlang_b_comparison(erlang_table)
display(kept_figure(lease_figures.plot_erlang_b(comparison, target_denial_share), figures,
                    "denials-vs-erlang-b",
                    "The share of requests refused with no fault, against the limit and "
                    "against the offered load, beside Erlang-B and the denial target."))
display(Markdown(leases.describe_erlang_fit(comparison)))

# %% [markdown]
# ## The lease TTL: leaks and excess under crashes and stalls
#
# The sizing sweep, at its heaviest offered load. Left: the denial share;
# faults add refusals on top of Erlang-B's, because leaked leases hold slots
# no live caller uses, and a short TTL refuses fewer only because it lets
# requests in past the limit. The floor no limit removes is the fail-closed
# refusals of callers whose connection had stalled
# (`requests_denied_store_unavailable`). Middle: leaked lease-seconds
# (`leaked_lease_seconds`: leases held by no live caller, whatever the
# cause), expected to grow with the TTL, since each leaked lease keeps its
# slot until the TTL passes. Right: concurrency excess
# (`concurrency_excess_lease_seconds`: lease-seconds of true concurrency
# above the limit), expected where the TTL is short enough for running
# requests to outlive their lease. The dashed red lines are the targets
# (lease-seconds per run).

# %%
targets = leases.RegionTargets.in_average_slots(
    target_denial_share, target_leaked_slots, target_excess_slots,
    run_seconds=leases.run_seconds_of(sizing_sweep))
recommendation = leases.recommend_region(sizing_table, targets)
display(kept_figure(lease_figures.plot_ttl_costs(sizing_table, recommendation), figures,
                    "costs-vs-lease-ttl",
                    "The denial share, leaked lease-seconds and concurrency excess against "
                    "the lease TTL under crashes and stalls, with their targets."))

# %% [markdown]
# ## The (limit, TTL) region to choose
#
# **Definition of the recommended region:** a tested point (offered load,
# limit, TTL) is acceptable when, in its *worst* seed, the denial share, the
# leaked lease-seconds and the concurrency excess are each at most their
# target. A (limit, TTL) pair is recommended when it was tested at every
# offered load of the sweep and is acceptable at each. If no pair
# qualifies, there is no region: the text says which target rules out which
# pairs instead of inventing one.

# %%
display(kept_figure(lease_figures.plot_region(recommendation), figures, "recommended-region",
                    "Which (limit, lease TTL) pairs meet every target at every offered load: "
                    "the recommended region."))
display(Markdown(leases.describe_region(recommendation)))
print(leases.region_line(recommendation))

# %% [markdown]
# Each tested point, with its worst and median seed of each cost and whether
# each met its target:

# %%
display(recommendation.per_point)

# %% [markdown]
# ## Caveats
#
# - The region holds for *this* traffic, crash rate and stall rate; the
#   scenario crashes replicas far more often than production does, so that a
#   short run sees enough leaks. Rerun with your own `request_duration`,
#   `arrivals` and `crash_rate` rather than scaling the answer.
# - A run starts with no lease held, so its first holding times see fewer
#   refusals than the steady state: short runs sit slightly below Erlang-B.
#   The offered load counts the work only; a lease is held about a round
#   trip longer, which adds a fraction of a percent at these durations.
# - With three seeds the standard errors are themselves rough; a point whose
#   seeds all refused nothing cannot be compared with Erlang-B at all.
# - Lease-seconds are per run: a TTL nearly as long as the run cannot show
#   its whole leak cost (a lease leaked late is counted only until the end).
# - The region's edges are tested values: the true edges lie between a
#   tested value inside and the next one outside. Narrow `limits` and
#   `lease_ttls` around them, and add seeds, to place them more precisely.

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
# # Tuning the reservation TTL
#
# **The question.** A gateway reserves a request's estimated cost in the budget
# store before the request runs, and the store forgets that hold after the
# *reservation TTL* unless the request settles first. Given how long requests
# run (a heavy-tailed duration distribution) and how often gateway replicas
# crash, **which TTL should a capacity planner choose?**
#
# - **Too short**, and the store reclaims the hold of a request that is still
#   running (a *premature expiry*). Its money no longer counts against the cap,
#   the store admits another request in its place, and the subject ends up
#   spending more than its cap.
# - **Too long**, and the hold of a request whose replica crashed keeps blocking
#   budget until the TTL passes (a *leaked hold*). A subject near its cap then
#   refuses requests the truth had room for.
#
# The notebook runs one scenario (`data/scenarios/ttl-tuning.toml`: a Redis
# budget store, heavy-tailed request durations, crashing replicas) at a range of
# TTLs, several seeds each (the sweep `data/sweeps/ttl-tuning.toml`), and
# measures both costs with the lab's oracle (definitions in `docs/metrics.md`).
#
# **How to read the figures.** The x-axis is always the reservation TTL in
# seconds, on a log scale. A line is the median over seeds; the band around it
# spans the 10th to 90th percentile of the seeds. Dotted grey lines mark
# quantiles of the request-duration distribution (p50: half the requests run
# longer than this). The green shading is the **recommended TTL range**,
# computed from the results (defined in the section *The trade-off*); when no
# TTL qualifies, nothing is shaded and the text says so.
#
# Change the parameters below to plan for your own traffic: `request_duration`
# (e.g. `"lognormal(2s, 1.2)"` or `"empirical(data/workloads/durations_ms.csv)"`),
# `crash_rate` (crashes per replica, e.g. `"2/h"`), the TTLs to try, the
# tolerances. Finished runs are kept and reused (one folder per configuration
# under `results_dir`), and every figure is also written as a PNG under
# `results_dir/figures/`.

# %% tags=["parameters"]
sweep_file = "data/sweeps/ttl-tuning.toml"  # relative to the lab's checkout
seeds = None  # None: the sweep file's; a count N (seeds 1..N) or a list of seeds
ttl_range = None  # None: the sweep file's; {low, high, steps, scale} or a list of durations
request_duration = None  # None: the scenario's (workload.duration)
crash_rate = None  # None: the scenario's (faults.crash.rate, crashes per replica)
set_fields = {}  # any other scenario fields, by dotted path
overshoot_tolerance_percent_of_cap = 1.0  # points above the best TTL's overshoot
leak_denial_tolerance_percent_of_arrived = 1.0  # points above the best TTL's leak denials
seed_quantile = 0.5  # judge each TTL by this quantile over seeds (0.5: median)
results_dir = None  # None: data/results/notebooks/02_tuning_the_reservation_ttl
workers = None  # local worker processes (None: one per core)

# %%
# ruff: noqa: E402 -- a notebook imports after its parameters cell, which papermill overrides
# %matplotlib inline
from IPython.display import Markdown, display

from simulator.analysis import figures_dir, kept_figure, notebook_results_dir, ttl, ttl_figures
from simulator.sweeps import read_metrics, read_results, results_dir_for, run_sweep

sweep = ttl.load_ttl_sweep(sweep_file, seeds=seeds, ttl_range=ttl_range,
                           request_duration=request_duration, crash_rate=crash_rate,
                           set_fields=set_fields)
scenario = ttl.ttl_sweep_scenario(sweep)
root = notebook_results_dir("02_tuning_the_reservation_ttl", results_dir)
out = results_dir_for(sweep, root)
figures = figures_dir(root)  # each figure is also kept there as a PNG
outcome = run_sweep(sweep, out, workers=workers)
print(f"{outcome.runs_total} runs ({outcome.already_done} reused from {out})")
if outcome.failed:
    print("failed runs (left out of the figures):", outcome.failed)

durations = scenario.workload.duration
quantiles = ttl.duration_quantiles(durations)
shares = ttl.with_cost_shares(read_results(out), ttl.subject_cap_of(scenario))
recommendation = ttl.recommend_ttl_range(shares, ttl.TtlTolerances(
    overshoot_percent_of_cap=overshoot_tolerance_percent_of_cap,
    leak_denials_percent_of_arrived=leak_denial_tolerance_percent_of_arrived,
    seed_quantile=seed_quantile))
display(Markdown(ttl.describe_setup(scenario, sweep)))

# %% [markdown]
# ## How many requests outlive a TTL
#
# The black curve is the share of requests that run longer than *t*: for a
# TTL of *t*, that is the share of holds that expire while their request still
# runs, unless the request is cut short. The purple dots are the TTLs the sweep
# tries. On a heavy tail the curve falls slowly: every tenfold longer TTL
# still leaves a sizeable share of requests running past it.

# %%
display(kept_figure(
    ttl_figures.plot_duration_tail(durations, shares[ttl.TTL_SECONDS].unique(), recommendation,
                                   quantiles),
    figures, "duration-tail",
    "The share of requests that run longer than each duration, with the TTLs the sweep tries."))

# %% [markdown]
# ## Too short: holds expire under running requests
#
# Left: premature expiries, per 100 admitted requests. Middle: the money those
# holds held, as a share of the subjects' caps (summed over subjects). Right:
# the **cap overshoot the oracle attributes to premature expiry**
# (`cap_overshoot_by_hold_expired_while_running_microdollars`), as a share of
# the caps; the dashed red line is the overshoot limit used for the
# recommendation. The longer the TTL, the fewer requests outlive it, so all
# three are expected to fall as the TTL grows (the trend measured in this run
# is stated under the trade-off figure). Not every premature expiry becomes
# overshoot: only one on a subject close to its cap lets a request in that the
# cap had no room for.

# %%
display(kept_figure(ttl_figures.plot_too_short(shares, recommendation, quantiles), figures,
                    "too-short",
                    "Premature expiries, the money their holds held and the cap overshoot "
                    "they caused, against the reservation TTL."))

# %% [markdown]
# ## Too long: holds of crashed requests block the budget
#
# Left: leaked hold money × time (`leaked_hold_microdollar_seconds`, in
# dollar-seconds): how much budget dead requests kept blocked, and for how
# long. Middle: the most money leaked at once on one subject, as a share of
# its cap. Right: denials while the truth had room (*false denials*) and the
# part of them the leaked holds caused (`denials_caused_by_leaked_holds`), per
# 100 arrived requests; the dashed red line is the leak-denial limit. A longer
# TTL keeps each leaked hold longer, so these are expected to rise with the
# TTL, and to flatten for TTLs as long as the run itself (a hold leaked near
# the end is counted only until the run ends). Leaks are few and land on
# subjects at random moments, so the seeds spread widely here.

# %%
display(kept_figure(ttl_figures.plot_too_long(shares, recommendation, quantiles), figures,
                    "too-long",
                    "Leaked hold money over time, the most leaked at once on one subject, "
                    "and the false denials leaked holds caused, against the reservation TTL."))

# %% [markdown]
# ## The trade-off, and the TTL range to choose
#
# The two costs the recommendation weighs, on one axis, with their limits
# dashed. The y-axis is linear up to the limits and logarithmic above them:
# the decision is made near the limits, while the leak denials of a long TTL
# can be many times larger. **Definition of the
# recommended range:** for each tested TTL, take the median over seeds (or the
# `seed_quantile` chosen above) of the premature-expiry overshoot (% of the
# caps) and of the denials caused by leaked holds (% of arrived requests). A
# TTL is acceptable when each cost is within its tolerance (a parameter, in
# percentage points) of the lowest value that cost reaches over the tested
# TTLs. The recommended range spans the longest run of consecutive acceptable
# TTLs. If no TTL is acceptable, there is no range: the text says which limit
# rules out which TTLs instead of inventing one.

# %%
display(kept_figure(ttl_figures.plot_trade_off(shares, recommendation, quantiles), figures,
                    "trade-off",
                    "Premature-expiry overshoot and leak denials against the reservation "
                    "TTL on one axis, with their limits and the recommended range."))
display(Markdown(ttl.describe_trends(shares)))
display(Markdown(ttl.describe_recommendation(recommendation, durations)))

# %% [markdown]
# Each tested TTL, with the statistic over seeds of each cost and whether it
# is within its limit:

# %%
display(recommendation.per_ttl)

# %% [markdown]
# ## Inside one run
#
# What the store miscounts over virtual time, in one seed, at the shortest
# tested TTL, inside the recommended range (or the middle TTL when there is
# none) and at the longest. Left: the money of running requests whose hold
# has already expired (the store no longer counts it; this is what lets the
# cap be overshot). Right: the money of leaked holds the store still counts
# (it blocks admissions until the TTL passes). On the right, a crash shows as
# a step up, and the step comes down when the leaked holds' TTL passes, or
# stays until the end of the run when the TTL is longer than what is left.

# %%
examples = ttl.example_ttls(recommendation)
points = shares.loc[shares[ttl.TTL_SECONDS].isin(examples.values()), "point"].unique().tolist()
series = ttl.aggregate_series(read_metrics(out, points=points), shares, examples)
display(kept_figure(ttl_figures.plot_over_time(series), figures, "over-time",
                    "In one run per example TTL, the money of running requests whose hold "
                    "expired and of leaked holds the store still counts, over virtual time."))

# %% [markdown]
# ## Caveats
#
# - The recommendation holds for *this* duration tail, crash rate, load and
#   caps; the lab's scenario crashes replicas far more often than production
#   does, so that a short run sees enough crashes. The leak cost grows with
#   the crash rate (more leaked holds) and the overshoot cost with the tail
#   (more requests outliving a TTL):
#   rerun with your own `request_duration` and `crash_rate` rather than
#   scaling the answer.
# - A run lasts the scenario's arrival window plus its drain. TTLs longer than
#   that cannot show their whole leak cost, so do not read the flat right end
#   of the leak curves as "it stops getting worse".
# - The overshoot split by cause is proportional, not counterfactual (see
#   `docs/metrics.md`): with other faults in the scenario (lost replies, server
#   restarts), part of the overshoot goes to other causes.
# - The edges of the range are tested TTLs: the true edges lie somewhere
#   between a tested TTL inside and the next one outside. Narrow `ttl_range`
#   around them (and add seeds) to place them more precisely.

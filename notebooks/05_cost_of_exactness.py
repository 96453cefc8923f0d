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
# # The cost of exactness
#
# **Question: how much backend work does one admission cost as the holds in
# flight on one hot namespace grow, and what does that mean for a namespace
# that is hot?**
#
# The Redis budget stores are exact because they reserve centrally. Every
# reserve script reads the whole hash of live holds of its key with one
# `HGETALL`, drops the expired ones, sums the rest and compares with the cap;
# only then does it write its own hold. So the work of one admission grows
# with the holds in flight on the key it reads. `redis_v1` enforces subject
# caps and reads its subject's hash; `redis_v2` also enforces a namespace cap
# and so also reads the namespace's hash, which holds every hold in flight in
# the namespace.
#
# The runs use `data/scenarios/exactness-hot-namespace.toml`: one namespace,
# a few subjects, no faults, caps and TTL far out of reach, so every request
# is admitted and settled. What varies is the store and the request duration
# (`workload.duration`, fixed values): by Little's law, holds in flight =
# arrival rate x duration.
#
# **How to read the figures.** The x axis is always the holds in flight in
# the namespace (time average over the arrival window, which is also what an
# arriving request meets on average). One colour per store: the line is the
# median over seeds, the shaded band the 10th to 90th percentile, and in the
# time figure the dashed line is a least-squares fit. The first figure counts
# work (commands and scripts, deterministic); the second times it (machine-
# and load-dependent): what the lab waited for, what the server spent in
# scripts, and what the store's own scripts cost replayed alone. Both are
# also written as PNGs under `results_dir/figures/`.

# %% tags=["parameters"]
stores = ["axond_budget.redis_v1", "axond_budget.redis_v2"]
durations = ["10ms", "250ms", "500ms", "1s", "2s"]   # workload.duration of each point
seeds = 3                 # seeds per point: a count (1..N) or a list
set_fields = {}           # dotted overrides of the base scenario, e.g. {"duration": "2s"}
backend = "auto"          # auto (real Redis if redis-server is installed), redis, fakeredis
saturation_durations = [0.1, 1.0, 10.0]   # request durations (s) for the saturation table
results_dir = None        # None: data/results/notebooks/05_cost_of_exactness
workers = None            # runs at once, in processes (None or 1: one at a time, for timing)

# %%
# ruff: noqa: E402  (a notebook imports after its papermill parameters cell)

from IPython.display import Markdown, display

from simulator.analysis import figures_dir, kept_figure, notebook_results_dir
from simulator.analysis.exactness import (
    backend_description,
    choose_backend,
    counts_conclusion,
    denied_runs,
    hash_reads_note,
    per_admission,
    plan_tasks,
    plot_counts,
    plot_times,
    point_table,
    run_tasks,
    saturation_table,
    seed_list,
    subjects_of,
    times_conclusion,
    write_results,
)

out_dir = notebook_results_dir("05_cost_of_exactness", results_dir)
figures = figures_dir(out_dir)  # each figure is also kept there as a PNG
chosen = choose_backend(backend)
tasks = plan_tasks(stores, durations, seeds, set_fields)
display(Markdown(backend_description(chosen, backend)))
print(f"{len(tasks)} run(s): {len(stores)} store(s) x {len(durations)} duration(s) x "
      f"{len(seed_list(seeds))} seed(s)")

# %% [markdown]
# ## The runs
#
# Each run is one store at one request duration and seed. Besides the run
# itself, the store's own scripts (as the run sent them, without the lab's
# shim around them) are replayed in order on a fresh backend and timed: the
# lab reads the post-state of every key a script touches, including the
# holds hashes, and that observation also grows with the holds, so only the
# replay isolates what the store itself costs.

# %%
runs, metrics = run_tasks(tasks, chosen, workers=workers)
frame = per_admission(runs, metrics)
written = write_results(runs, metrics, out_dir)
print("results:", ", ".join(str(path) for path in written))
denied = denied_runs(frame)
if denied.empty:
    print("every request of every run was admitted: the caps never decided, as intended")
else:
    print(f"WARNING: {len(denied)} run(s) denied requests; their per-admission figures mix "
          "in denials:")
    display(denied[["store", "workload.duration", "seed", "requests_arrived",
                    "requests_admitted"]])
display(point_table(frame))

# %% [markdown]
# ## Counted work: commands and scripts per admission
#
# Left: the commands the store's scripts ran per admission (a reserve and a
# settle), as the lab's shim counts them; right: the scripts sent per
# admission. Both are deterministic.

# %%
display(kept_figure(plot_counts(frame), figures, "counts-per-admission",
                    "Commands and scripts per admission of each store against the holds "
                    "in flight."))
display(Markdown(counts_conclusion(frame)))

# %% [markdown]
# A reserve runs the same handful of commands whatever the holds in flight
# (`HGETALL`, `GET`, `HSET`, `PEXPIRE`, per scope), and a settle the same few
# again. When the lines above are flat, counting commands would call the
# store's work constant: the growth hides *inside* `HGETALL`, which returns
# every hold of the hash, and inside the Lua loop that parses each one.
# Counted commands are the wrong measure of this store's cost; time is the
# right one.

# %% [markdown]
# ## Timed work: microseconds per admission
#
# Microseconds per admission against holds in flight. Left: the wall time
# the lab waited on the backend (the store's scripts, plus the lab's
# observation of every key they touched and the client's decoding of it).
# Middle, on real Redis only: the server's own time inside scripts (`INFO
# commandstats`; still includes the lab's shim). Right: the store's own
# scripts replayed alone (the server's time on real Redis; the replay's wall
# time on fakeredis). The dashed lines are least-squares fits; the fitted
# costs follow the figure.

# %%
display(kept_figure(plot_times(frame), figures, "time-per-admission",
                    "Microseconds per admission of each store against the holds in flight, "
                    "with least-squares fits."))
display(Markdown(times_conclusion(frame)))
display(Markdown(hash_reads_note(subjects_of(tasks))))

# %% [markdown]
# Every admission pays a fixed cost (the intercept) plus a cost per hold in
# flight (the slope): the `HGETALL` and the Lua loop are linear in the size
# of the hash they read. An R² near 1 says the line explains the runs; a low
# one says noise (another process on the machine) dominates the timings of
# that store, which happens most to the gentlest slope. The ratio of the two
# stores' slopes depends less on the machine than the slopes themselves:
# compare it with the hash sizes each reserve reads, stated just above.

# %% [markdown]
# ## What it means for a hot namespace
#
# Holds in flight are the namespace's admission rate times its requests'
# duration, so the server time a hot namespace costs per second is
# `rate x (intercept + slope x rate x duration)`: it grows with the *square*
# of the rate, and linearly with how long requests last (streamed LLM
# responses last seconds to minutes). Redis runs scripts one at a time, so
# all of a namespace's reserves queue on one core. With `redis_v2` every
# admission in the namespace reads every hold of the namespace, however many
# subjects share it; with `redis_v1` each pays only for its own subject's.
#
# The table turns the fit of the store's scripts alone (for this scenario's
# subjects sharing the namespace) into the admission rate of one namespace at
# which they would keep the server busy all the time, for a few request
# durations, and the holds in flight at that rate.
# It extrapolates the fitted line (beyond the holds these runs reached) and
# ignores everything else the server does: read it as an upper bound on
# the rate one hot namespace can sustain on this machine, not a capacity plan
# (and on fakeredis, whose Lua runs far slower than a real server's, not
# even that).

# %%
display(saturation_table(frame, saturation_durations))

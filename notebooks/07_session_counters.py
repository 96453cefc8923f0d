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
# # Session counters: retries, the in-memory twin, and the cleanup race
#
# **The question.** An agent gateway keeps each session's budgets (tokens,
# tool calls) in av_state's counters: every tool call checks and charges
# all of its session's counters in one Redis script, works, gives back what
# it did not use (a *refund*), and the session's counters are cleared when
# it closes. Each counter lives 24 h after it was last touched. Sessions last
# hours, some longer than a day. **What do lost replies, driver retries, the
# in-memory twin and the session's own cleanup do to those budgets?**
#
# - **Lost replies and driver retries.** A spend whose reply is lost, and
#   that the driver (or the session itself) sends again, is charged twice: a
#   *double debit*. It fails conservative: the session is refused calls its
#   true spend had room for (*false refusals*). A refund sent again would
#   credit twice — budget *minted* out of a network flap — unless its
#   one-shot replay marker stops the second one.
# - **The in-memory twin's missing TTL.** av_state's in-memory store is the
#   Redis store's twin in every answer but one: its counters never expire.
#   On Redis a session that sits idle for more than a day loses its counters
#   and may spend its budget again (*counter resets*, then *overshoot*); the
#   twin never does, and keeps every counter it is not told to remove.
# - **The cleanup race.** A session's counters are cleared at its end while
#   its last call may still run or be retried: whatever that call writes
#   afterwards re-creates a counter the cleanup removed (*resurrected*), with
#   its TTL, or — from a refund not gated on the counter still existing —
#   with none, to live forever.
#
# Three sweeps answer it, on the av_state demo scenario
# (`data/scenarios/av-state.toml`: about 140 sessions of up to 48 virtual
# hours, most calls minutes apart but about one gap in 80 longer than a
# day): `data/sweeps/session-counters-retries.toml` (reply loss × driver
# retries, on the fixed store and on the historical refund without a replay
# marker), `data/sweeps/session-counters-twin.toml` (the twin beside Redis on
# the same sessions, with no network fault, for three session lifetimes) and
# `data/sweeps/session-counters-cleanup.toml` (cleanup at the end or an hour
# later, on the fixed store and on the historical refund not gated on
# `EXISTS`). The lab's oracle measures each cost (definitions in
# `docs/metrics.md`, "Session counters").
#
# **How to read the figures.** A line is the median over seeds and the band
# around it spans the 10th to 90th percentile of the seeds; bars are medians
# over seeds, with each seed a dot. Every number printed under a figure is
# computed from the same runs by `simulator.analysis.sessions`.
#
# Change the parameters below to ask about your own sessions: the stores, the
# reply-loss rates, the driver retries, the lifetimes, the cleanup delays,
# and any scenario field (`set_fields`). Finished runs are kept and reused
# (one folder per configuration under `results_dir`), and every figure is
# also written as a PNG under `results_dir/figures/`.

# %% tags=["parameters"]
retries_sweep_file = "data/sweeps/session-counters-retries.toml"  # relative to the lab's checkout
twin_sweep_file = "data/sweeps/session-counters-twin.toml"
cleanup_sweep_file = "data/sweeps/session-counters-cleanup.toml"
seeds = None  # None: the sweep files'; a count N (seeds 1..N) or a list of seeds
reply_losses = None  # None: the retries sweep's; a list of shares, e.g. [0.0, 0.05]
driver_retries = None  # None: the retries sweep's; re-sends after a timeout, e.g. [0, 10]
retry_stores = None  # None: the retries sweep's; store kinds, e.g. ["av_state.redis"]
lifetimes = None  # None: the twin sweep's; session lifetimes, e.g. ["uniform(24h, 72h)"]
cleanup_afters = None  # None: the cleanup sweep's; delays after a session's end, e.g. ["0s"]
race_stores = None  # None: the cleanup sweep's; store kinds
set_fields = {}  # any other scenario fields, by dotted path, every sweep
results_dir = None  # None: data/results/notebooks/07_session_counters
workers = None  # local worker processes (None: one per core)

# %%
# ruff: noqa: E402 -- a notebook imports after its parameters cell, which papermill overrides
from IPython.display import Markdown, display

from simulator.analysis import (
    figures_dir,
    kept_figure,
    notebook_results_dir,
    session_figures,
    sessions,
)
from simulator.sweeps import read_metrics, read_results, results_dir_for, run_sweep

retries_sweep = sessions.load_session_sweep(
    retries_sweep_file, seeds=seeds, set_fields=set_fields, stores=retry_stores,
    reply_losses=reply_losses, driver_retries=driver_retries)
twin_sweep = sessions.load_session_sweep(twin_sweep_file, seeds=seeds, set_fields=set_fields,
                                         lifetimes=lifetimes)
cleanup_sweep = sessions.load_session_sweep(cleanup_sweep_file, seeds=seeds,
                                            set_fields=set_fields, stores=race_stores,
                                            cleanup_afters=cleanup_afters)
root = notebook_results_dir("07_session_counters", results_dir)
figures = figures_dir(root)  # each figure is also kept there as a PNG

tables, folders = {}, {}
for sweep in (retries_sweep, twin_sweep, cleanup_sweep):
    out = results_dir_for(sweep, root)
    outcome = run_sweep(sweep, out, workers=workers)
    print(f"{sweep.name}: {outcome.runs_total} runs ({outcome.already_done} reused from {out})")
    if outcome.failed:
        print("  failed runs (left out of the figures):", outcome.failed)
    tables[sweep.name] = sessions.session_table(read_results(out), sweep)
    folders[sweep.name] = out
retries_table = tables[retries_sweep.name]
twin_table = tables[twin_sweep.name]
cleanup_table = tables[cleanup_sweep.name]


for sweep in (retries_sweep, twin_sweep, cleanup_sweep):
    display(Markdown(sessions.describe_sweep(sweep)))

# %% [markdown]
# ## Lost replies and driver retries
#
# Left: budget minted by refunds credited twice. Middle: double debits,
# spends of one call charged more than once (`double_debits`). Right: the
# calls those double debits refused (`false_refusals_from_double_debits`:
# refusals an exactly-once store would not have made). One row of panels
# per store, one band per number of driver retries.
#
# What to expect: with no driver retries a lost reply still double-debits
# when the session retries the call it saw fail (filed under `reply_lost`);
# the driver's re-sends add the ones it runs twice itself
# (`duplicate_execution`). The fixed store's refunds carry a one-shot
# marker, so a re-sent refund is a no-op (`refund_replays_blocked`) and no
# budget is minted at any loss or retry count; the historical refund without
# a marker mints on every refund the driver sends twice, and the lab files
# that under `store_logic`, exposed by the re-send: a sound refund is
# one-shot, so the fault excuses none of it.

# %%
display(kept_figure(session_figures.plot_retry_damage(retries_table), figures,
                    "retries-vs-reply-loss",
                    "Budget minted, double debits and the refusals they caused, per store, "
                    "against reply loss, one band per number of driver retries."))
retry_findings = sessions.retry_findings(retries_table)
for line in sessions.retry_lines(retry_findings):
    print(line)

# %% [markdown]
# ## The in-memory twin's missing TTL
#
# The same sessions (the same seed draws the same sessions) on
# `av_state.redis` and on `av_state.in_memory`, with no network fault, so
# that the store is the only difference. Per session lifetime, each panel
# sets the two stores side by side: counters reset under a live session
# (`counter_resets`: on Redis, its TTL ran out while the session was idle for
# a day), the budget spent past its limit (`budget_overshoot_units`),
# counters held a day after they were last touched (`counters_kept_past_ttl`
# and `counter_hours_kept_past_ttl`: Redis would have expired them), and
# counters with no expiry at the end (`counters_without_ttl_at_end`).
#
# What to expect: sessions shorter than a day cannot sit idle for a day, so
# the two stores agree on resets and overshoot. Past a day, Redis resets the
# counters of sessions idle that long and lets them spend their budget again;
# the twin never does. The twin pays in memory instead: a counter nobody
# removes (one a retried call re-created after its session's cleanup, even
# in a short session) stays forever, where Redis drops it a day later. A
# test against the twin therefore misses the resets production has, and
# keeps counters production would have dropped.

# %%
twin = sessions.twin_comparison(twin_table)
display(kept_figure(session_figures.plot_twin(twin, twin_table), figures, "twin-vs-redis",
                    "The in-memory twin beside Redis per session lifetime: counter resets, "
                    "budget overshoot and counters kept past their TTL."))
for line in sessions.twin_lines(twin):
    print(line)

# %%
display(twin)

# %% [markdown]
# ## The cleanup race over time
#
# The runs' metric series (sampled every 30 minutes of virtual time): left,
# the counters re-created after their session's cleanup removed them, so
# far (`counters_resurrected`); right, the counters live with no expiry at
# each sample (`counters_without_ttl_now`). One band per store and cleanup
# delay.
#
# What to expect: the fixed store's refunds are gated on the counter still
# existing, so only a spend retried after the cleanup re-creates a counter,
# with its 24 h TTL. The historical refund not gated on `EXISTS` also
# re-creates the counter of every refund that lands after the cleanup, and
# its clamp leaves it with no TTL: such a counter never expires. Clearing
# the counters an hour after the session's end leaves almost no call to
# race (only one still working an hour later).

# %%
race = sessions.race_series(read_metrics(folders[cleanup_sweep.name]), cleanup_table)
display(kept_figure(session_figures.plot_race(race), figures, "cleanup-race-over-time",
                    "Counters re-created after their session's cleanup, and counters with "
                    "no expiry, over virtual time, per store and cleanup delay."))
for line in sessions.race_lines(sessions.race_findings(race)):
    print(line)

# %% [markdown]
# ## Caveats
#
# - The sessions are the demo's: their call gaps have a heavy tail (median
#   10 min, one in 80 past a day) so that a short sweep sees sessions idle
#   for a day. Counter resets scale with how often your sessions pause that
#   long; rerun with your own `workload.sessions` fields rather than scaling
#   these counts.
# - Double debits and false refusals are counts per run of about 140
#   sessions; false refusals count refused attempts, retries included, so a
#   session at its limit adds one per retry.
# - The twin is per replica: a session is served by one replica, so it sees
#   its own counters; a crash would lose them (no crash is injected here).
# - With three seeds the bands are rough; a cost that only some seeds show
#   (the cleanup race, resets) needs more seeds before its median means much.

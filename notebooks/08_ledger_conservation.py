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
# # The lease ledger: conservation, losses by cause, and consolidation
#
# **The question.** Gateway instances (*holders*) fund their spends from
# leases on one tollgate ledger: each holder takes a lease of units for an
# account, charges spends to it locally, bills the usage to the ledger in
# batches, gives back what it did not spend, and exchanges a lease that runs
# low for a bigger one. Replicas crash and replies are lost on the way.
# **Does every unit stay accounted for, where do the units the holders lose
# go, and what does exchanging a lease in one transaction buy?**
#
# - **The conservation equation.** For every account the ledger states
#   `deposited + overage = balance + active lease grants + settled usage +
#   settlement loss + expired`. The lab checks it after every transaction
#   and samples its terms over time; the *residual* (left minus right) is
#   zero for a sound ledger, whatever the faults.
# - **Losses by cause.** A holder that crashes takes its unbilled usage with
#   it (*billing loss*: units consumed, never billed) and leaves its lease to
#   the TTL reclaim (*units stranded*), as does a grant whose reply was lost
#   (*ambiguous* acquire or consolidation). The reclaim writes what was
#   neither billed nor given back off as *settlement loss*; the lab sets that
#   beside the *true* loss (units granted, neither consumed nor given back in
#   time). Each loss is filed under what the lab did; what nothing the lab
#   did explains is the ledger's own (`store_logic`).
# - **Consolidate against release-then-acquire.** The ledger's `consolidate`
#   releases a low lease and re-grants in one transaction, never smaller than
#   the credit it restores. The historical holder
#   (`tollgate.variants.release_then_acquire`) releases, then acquires: near
#   exhaustion the acquire is sized against a balance other instances drain
#   meanwhile, so it gets back less than it gave (*re-grants below credit*,
#   *regrant shortfall*).
#
# Two sweeps over the tollgate demo scenario (`data/scenarios/tollgate.toml`:
# 20 replicas, 8 accounts, 200 spends/s for a minute, then a drain until
# every lease is settled), built here from the notebook's parameters:
# replica crash rate × reply loss on the fixed ledger, and the two holders
# side by side with each account funded below what its spends ask for. The lab's oracle
# measures every cost (definitions in `docs/metrics.md`, "Lease ledger").
#
# **How to read the figures.** Units are the ledger's own (cost units, shown
# in millions). Bars are means over seeds (means add up, so stacked causes
# sum to the total); where a bar is not stacked, each seed is a dot. Every
# sentence under a figure is computed from the same runs.
#
# Change the parameters below to ask about your own fleet: the base
# scenario, the fault rates, the deposit of the side-by-side, any scenario
# field (`set_fields`), and the backend (a throwaway PostgreSQL gives the
# same results as the in-memory ledger). Finished runs are kept and reused
# (one folder per configuration under `results_dir`), and every figure is
# also written as a PNG under `results_dir/figures/`.

# %% tags=["parameters"]
scenario_file = "data/scenarios/tollgate.toml"  # the base scenario, relative to the lab's checkout
seeds = 5  # seeds per point: a count N (seeds 1..N) or a list of seeds
crash_rates = ["0/h", "60/h", "240/h"]  # replica crashes, per replica
reply_losses = [0.0, 0.01, 0.05]  # share of replies lost
series_seed = None  # the seed whose terms are drawn over time (None: the sweep's first)
exchange_stores = ["tollgate.ledger", "tollgate.variants.release_then_acquire"]  # reference first
exchange_deposit = 10_000_000  # units per account in the side-by-side: below the demo's demand
set_fields = {}  # any other scenario fields, by dotted path, both sweeps
backend = None  # None: the scenario's (memory); or "postgresql://USER@127.0.0.1:PORT/DB"
results_dir = None  # None: data/results/notebooks/08_ledger_conservation
workers = None  # local worker processes (None: one per core)

# %%
# ruff: noqa: E402 -- a notebook imports after its parameters cell, which papermill overrides
from IPython.display import Markdown, display

from simulator.analysis import (
    figures_dir,
    kept_figure,
    ledger,
    ledger_figures,
    notebook_results_dir,
)
from simulator.sweeps import read_metrics, read_results, results_dir_for, run_sweep

fault_sweep = ledger.fault_rate_sweep(scenario_file, seeds, crash_rates, reply_losses,
                                      set_fields=set_fields, backend=backend)
exchange_sweep = ledger.exchange_sweep(scenario_file, seeds, exchange_stores, exchange_deposit,
                                       set_fields=set_fields, backend=backend)
root = notebook_results_dir("08_ledger_conservation", results_dir)
figures = figures_dir(root)  # each figure is also kept there as a PNG

tables, folders = {}, {}
for sweep in (fault_sweep, exchange_sweep):
    out = results_dir_for(sweep, root)
    outcome = run_sweep(sweep, out, workers=workers)
    print(f"{sweep.name}: {outcome.runs_total} runs ({outcome.already_done} reused from {out})")
    if outcome.failed:
        print("  failed runs (left out of the figures):", outcome.failed)
    tables[sweep.name] = ledger.ledger_table(read_results(out), sweep)
    folders[sweep.name] = out
faults_table = tables[fault_sweep.name]
exchange_table = tables[exchange_sweep.name]
# The points of the fault sweep in grid order, with the faults their runs saw.
points = ledger.fault_points(faults_table, fault_sweep)

# %% [markdown]
# ## The conservation equation over time
#
# Top: the equation's right side, stacked — where the deposited units sit
# at each sample of one run (`series_seed`) of the point whose runs saw the
# most faults (crashes and lost replies): unleased balance, units out on
# active leases (usage on them included), usage billed on settled leases,
# settlement loss written off, allowance expired. The dashed line is the left side, `deposited +
# overage`. Middle: units the holders consumed against units the ledger
# billed; the gap is usage on its way, and at the end what was never billed.
# Bottom: the residual (left minus right) at every sample of every run of
# the sweep, one line per run.
#
# What to expect: leases draw the balance into active grants; releases,
# consolidations and the reclaim sweep move them on to settled usage,
# settlement loss or back to the balance. Whatever the faults, the stack
# meets the dashed line at every instant and the residual stays at zero.
# (The lab reads an account's statement after each transaction that touches
# it, so the first sample, before any transaction, shows nothing deposited.)

# %%
conservation = ledger.conservation_runs(read_metrics(folders[fault_sweep.name]), points,
                                        fault_sweep, series_seed)
display(kept_figure(ledger_figures.plot_conservation(conservation), figures,
                    "conservation-terms-over-time",
                    "The conservation equation's terms and its residual over virtual time, "
                    "one run per fault setting."))
display(Markdown(ledger.conservation_text(conservation, faults_table)))

# %% [markdown]
# ## Billing loss and settlement loss by cause, as faults grow
#
# One bar per point of the sweep (crash rate × reply loss), the mean over
# seeds. Top: billing loss (units consumed and never billed) by cause —
# `holder_crashed` (a crashed holder's usage not yet billed),
# `unbilled_at_end` (a live holder still held it when the run ended),
# `store_logic` (usage that reached the ledger and was not billed). Middle:
# units stranded with no holder until the TTL reclaim, by cause —
# `ambiguous_acquire` and `ambiguous_consolidate` (the lab lost or timed out
# the grant's reply), `holder_crashed`, `store_logic`. Bottom: the settlement
# loss the ledger wrote off against the true loss, each seed a dot.
#
# What to expect: billing loss and stranded units under `holder_crashed`
# grow with the crash rate, the `ambiguous_*` causes with reply loss, and
# nothing is the ledger's. The reclaim cannot tell a unit consumed and never
# billed from one never consumed, so the settlement loss it writes off is
# the true loss plus the billing loss of settled leases; anything beyond
# (`settlement_loss_excess_units`) would be the ledger's.

# %%
display(kept_figure(ledger_figures.plot_losses(faults_table, points), figures,
                    "losses-by-cause-vs-fault-rates",
                    "Billing loss and stranded units by cause, and settlement loss against "
                    "the true loss, for each crash rate and reply loss."))
display(Markdown(ledger.loss_text(faults_table, points)))

# %% [markdown]
# ## Consolidate against release-then-acquire, near exhaustion
#
# The same scenario and seeds with each account funded with
# `exchange_deposit` units, below what its spends ask for over the run, on
# the fixed ledger's holder (one `consolidate`) and on the historical one
# (`release`, then `acquire`). Left: spends refused, stacked by refusal (mean
# over seeds). Middle: re-grants smaller than the credit the holder gave back
# for them. Right: the units those re-grants fell short by. Each seed is a
# dot. A refusal counts spends, not units: read it beside the units each
# holder's spends consumed (below the figure), since a lease that shrinks
# funds small spends and refuses large ones.
#
# What to expect: as balances run low the grant policy caps a fresh grant at
# a share of the balance. The consolidation is exempt (it never re-grants
# less than it restores); the historical acquire is not, and other holders
# take the released units in between, so the holder's lease shrinks with
# every exchange.

# %%
kinds = ledger.exchange_kinds(exchange_sweep)  # the reference first
display(kept_figure(ledger_figures.plot_exchange(exchange_table, kinds, exchange_deposit,
                                                 len(exchange_sweep.seeds)),
                    figures, "consolidate-vs-release-then-acquire",
                    "Spends refused, re-grants below credit and their shortfall, consolidate "
                    "against release-then-acquire near exhaustion."))
display(Markdown("\n".join(ledger.exchange_lines(exchange_table, kinds))))

# %% [markdown]
# ## Caveats
#
# - One ledger serves the fleet and each key of the workload is one
#   account; losses scale with how many leases are out when a fault hits
#   (lease size, TTL, how often holders bill), so rerun with your own
#   `store_settings` rather than scaling these numbers.
# - Units stranded by a crashed holder are the unspent part of its leases:
#   they return to nobody until the sweep reclaims them past the grace, and
#   are then written off as settlement loss (the reclaim cannot prove them
#   unspent).
# - The side-by-side shows what one exchange costs the holder making it:
#   the units it is short go back to the balance, where other holders take
#   them, so the account as a whole loses nothing. What changes is which
#   spends the holders' leases can fund (a shrunken lease, small ones only)
#   and how often they must come back for more.
# - With few seeds the means are rough; a cause that only some seeds show
#   needs more seeds before its mean means much.

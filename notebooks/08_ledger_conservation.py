# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
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
#   (`tollgate.variant_release_then_acquire`) releases, then acquires: near
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
exchange_stores = ["tollgate.ledger", "tollgate.variant_release_then_acquire"]  # reference first
exchange_deposit = 10_000_000  # units per account in the side-by-side: below the demo's demand
set_fields = {}  # any other scenario fields, by dotted path, both sweeps
backend = None  # None: the scenario's (memory); or "postgresql://USER@127.0.0.1:PORT/DB"
results_dir = None  # None: data/results/notebooks/08_ledger_conservation
workers = None  # local worker processes (None: one per core)

# %%
# ruff: noqa: E402 -- a notebook imports after its parameters cell, which papermill overrides
import numpy as np
from IPython.display import Image, Markdown, display
from matplotlib.figure import Figure

from simulator.analysis import figure_png, lab_path, notebook_results_dir
from simulator.scenario import read_toml
from simulator.sweeps import build_sweep, read_metrics, read_results, results_dir_for, run_sweep

CRASH_RATE, REPLY_LOSS, STORE = "faults.crash.rate", "network.reply_loss", "store"
MILLION = 1e6
TERMS_RIGHT = ("balance", "active_lease_grants", "settled_usage", "settlement_loss", "expired")
"""The right side of the equation, as `metrics.parquet` names its terms."""

base = read_toml(lab_path(scenario_file))
fault_sweep = build_sweep({
    "name": "ledger-fault-rates", "seeds": seeds, "backend": backend, "set": set_fields,
    "vary": {CRASH_RATE: crash_rates, REPLY_LOSS: reply_losses}}, base, source=scenario_file)
exchange_sweep = build_sweep({
    "name": "ledger-exchange", "seeds": seeds, "backend": backend,
    "set": {**set_fields, "store_settings.deposit": exchange_deposit},
    "vary": {STORE: exchange_stores}}, base, source=scenario_file)
root = notebook_results_dir("08_ledger_conservation", results_dir)
figures = root / "figures"
figures.mkdir(parents=True, exist_ok=True)

tables, folders = {}, {}
for sweep in (fault_sweep, exchange_sweep):
    out = results_dir_for(sweep, root)
    outcome = run_sweep(sweep, out, workers=workers)
    print(f"{sweep.name}: {outcome.runs_total} runs ({outcome.already_done} reused from {out})")
    if outcome.failed:
        print("  failed runs (left out of the figures):", outcome.failed)
    results = read_results(out)
    # A run's summary names only the refusals it met: none of a kind is zero of it.
    refusals = [column for column in results.columns if column.startswith("spends_refused_by_")]
    results[refusals] = results[refusals].fillna(0)
    # Only this configuration's points and seeds: a folder may hold a wider earlier run.
    wanted = {point.point_id for point in sweep.points}
    tables[sweep.name] = results[results["point"].isin(wanted)
                                 & results["seed"].isin(sweep.seeds)].reset_index(drop=True)
    folders[sweep.name] = out
faults_table = tables[fault_sweep.name]
exchange_table = tables[exchange_sweep.name]


def show(figure, name):
    """Display a figure and keep it as a PNG beside the runs."""
    png = figure_png(figure)
    (figures / f"{name}.png").write_bytes(png)
    display(Image(png))


def units(value):
    """Units as a reader takes them in: millions past a million."""
    return f"{value / MILLION:,.2f} M" if abs(value) >= MILLION else f"{value:,.0f}"


def faults_seen(table):
    """Faults the lab injected per run: crashes plus replies lost."""
    return table["fault_crash_count"] + table["reply_lost_count"]


def point_label(row, between="\n"):
    return f"crashes {row[CRASH_RATE]}{between}reply loss {row[REPLY_LOSS] * 100:g}%"


# The points of the fault sweep in grid order, with the faults their runs saw.
points = (faults_table.assign(faults=faults_seen(faults_table))
          .groupby("point", sort=False)
          .agg(**{CRASH_RATE: (CRASH_RATE, "first"), REPLY_LOSS: (REPLY_LOSS, "first"),
                  "faults": ("faults", "mean")}))
points = points.loc[[point.point_id for point in fault_sweep.points
                     if point.point_id in points.index]]
points["label"] = points.apply(point_label, axis=1)  # on a figure's axis
points["name"] = points.apply(point_label, axis=1, between=", ")  # in a sentence
calmest, harshest = points["faults"].idxmin(), points["faults"].idxmax()

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
metrics = read_metrics(folders[fault_sweep.name])
aggregate = metrics[(metrics["namespace"] == "*")
                    & metrics["point"].isin(points.index)
                    & metrics["seed"].isin(fault_sweep.seeds)]
drawn_seed = fault_sweep.seeds[0] if series_seed is None else series_seed
series = aggregate[(aggregate["point"] == harshest)
                   & (aggregate["seed"] == drawn_seed)].sort_values("time_us")
seconds = series["time_us"] / 1e6

figure = Figure(figsize=(11, 10), layout="constrained")
top, middle, bottom = figure.subplots(3, 1, sharex=True, height_ratios=(3, 2, 2))
top.stackplot(seconds, *(series[term] / MILLION for term in TERMS_RIGHT),
              labels=[term.replace("_", " ") for term in TERMS_RIGHT], alpha=0.8)
top.plot(seconds, (series["deposited"] + series["overage_recorded"]) / MILLION, "k--",
         label="deposited + overage")
top.set_ylabel("units (millions)")
top.set_title(f"Where the units sit: {points.loc[harshest, 'name']}, "
              f"seed {drawn_seed}", fontsize=10)
top.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
middle.plot(seconds, series["units_consumed"] / MILLION, label="consumed by holders (truth)")
middle.plot(seconds, series["units_billed"] / MILLION, label="billed by the ledger")
middle.set_ylabel("units (millions)")
middle.legend(fontsize=8, loc="upper left")
for _, run in aggregate.groupby(["point", "seed"]):
    bottom.plot(run["time_us"] / 1e6, run["residual_units"], color="tab:red", alpha=0.4,
                linewidth=1)
span = 1.2 * max(1, aggregate["residual_units"].abs().max())  # a zero line sits mid-panel
bottom.set_ylim(-span, span)
bottom.set_ylabel("residual (units)")
bottom.set_xlabel("virtual time (s)")
bottom.set_title(f"The residual, every run of the sweep ({len(fault_sweep.points)} points × "
                 f"{len(fault_sweep.seeds)} seeds)", fontsize=10)
for ax in (top, middle, bottom):
    ax.grid(True, alpha=0.3)
show(figure, "conservation-terms-over-time")

end = series.iloc[-1]
drawn = faults_table[(faults_table["point"] == harshest)
                     & (faults_table["seed"] == drawn_seed)].iloc[0]
peak = series.loc[series["active_lease_grants"].idxmax()]
nonzero_runs = aggregate.groupby(["point", "seed"])["residual_units"].apply(
    lambda residual: bool((residual != 0).any()))
worst_transaction = int(faults_table["conservation_residual_max_units"].max())
violations = int(faults_table["conservation_violations"].sum())
residual_verdict = (
    f"was **0 at every one of the {len(aggregate):,} samples of all {len(nonzero_runs)} runs**"
    if not nonzero_runs.any() else
    f"left zero in **{int(nonzero_runs.sum())} of {len(nonzero_runs)} runs** (largest "
    f"|residual| at a sample: {units(aggregate['residual_units'].abs().max())} units)")
transaction_verdict = (
    "and after every transaction of every run (the oracle checks each one): no violation"
    if worst_transaction == 0 and violations == 0 else
    f"and after the transactions: {violations} violations, the worst residual "
    f"{units(worst_transaction)} units")
display(Markdown(
    f"**The run drawn** ({points.loc[harshest, 'name']}, seed "
    f"{drawn_seed}: {int(drawn['fault_crash_count'])} crashes, "
    f"{int(drawn['reply_lost_count'])} replies lost). Of {units(end['deposited'])} units "
    f"deposited (+ {units(end['overage_recorded'])} overage), at the end "
    f"{units(end['balance'])} sit in the balance, {units(end['settled_usage'])} were billed "
    f"as settled usage, {units(end['settlement_loss'])} written off as settlement loss, "
    f"{units(end['expired'])} expired, and {units(end['active_lease_grants'])} are still out "
    f"on active leases. At most {units(peak['active_lease_grants'])} units were out on leases "
    f"at once (at {peak['time_us'] / 1e6:.0f} s). The holders consumed "
    f"{units(end['units_consumed'])} units; the ledger billed {units(end['units_billed'])}, "
    f"{units(end['units_consumed'] - end['units_billed'])} short.\n\n"
    f"**The residual** `deposited + overage − (balance + active lease grants + settled usage "
    f"+ settlement loss + expired)` {residual_verdict}, {transaction_verdict}."))

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
def causes_of(table, prefix):
    """The summary's ``PREFIX<cause>`` columns, in the summary's order."""
    return [column for column in table.columns if column.startswith(prefix)]


def stacked_causes(ax, table, prefix, title):
    """Bars of the mean per point, stacked by cause."""
    means = table.groupby("point")[causes_of(table, prefix)].mean().loc[points.index]
    bottom = np.zeros(len(means))
    for column in means.columns:
        values = means[column].to_numpy() / MILLION
        if values.any():
            ax.bar(range(len(means)), values, bottom=bottom, label=column.removeprefix(prefix))
            bottom += values
    ax.set_xticks(range(len(means)), points["label"], fontsize=7)
    ax.set_ylabel("units (millions), mean per run")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")


figure = Figure(figsize=(max(8, 1.2 * len(points)), 11), layout="constrained")
billing_ax, stranded_ax, settlement_ax = figure.subplots(3, 1, sharex=True)
stacked_causes(billing_ax, faults_table, "billing_loss_units_by_", "Billing loss by cause")
stacked_causes(stranded_ax, faults_table, "units_stranded_by_", "Units stranded by cause")
width = 0.38
for offset, column, label in ((-width / 2, "settlement_loss_units", "reported by the ledger"),
                              (width / 2, "settlement_loss_true_units", "true")):
    means = faults_table.groupby("point")[column].mean().loc[points.index] / MILLION
    xs = np.arange(len(points)) + offset
    settlement_ax.bar(xs, means, width, alpha=0.6, label=label)
    for x, point in zip(xs, points.index, strict=True):
        runs = faults_table[faults_table["point"] == point][column] / MILLION
        settlement_ax.plot([x] * len(runs), runs, "o", color="black", markersize=2.5)
settlement_ax.set_xticks(range(len(points)), points["label"], fontsize=7)
settlement_ax.set_ylabel("units (millions) per run")
settlement_ax.set_title("Settlement loss: reported against true", fontsize=10)
settlement_ax.legend(fontsize=8, loc="upper left")
for ax in (billing_ax, stranded_ax, settlement_ax):
    ax.grid(True, axis="y", alpha=0.3)
show(figure, "losses-by-cause-vs-fault-rates")


def cause_lines(table, prefix, what):
    """One sentence per cause: its mean per run at the calmest and the harshest
    point, and where it is largest; the causes zero in every run together."""
    means = table.groupby("point")[causes_of(table, prefix)].mean()
    lines, never = [], []
    for column in means.columns:
        cause = column.removeprefix(prefix)
        if not (table[column] != 0).any():
            never.append(f"`{cause}`")
            continue
        top = means[column].idxmax()
        lines.append(
            f"- {what} under `{cause}`: {units(means.loc[calmest, column])} per run at "
            f"{points.loc[calmest, 'name']}, "
            f"{units(means.loc[harshest, column])} at "
            f"{points.loc[harshest, 'name']}; largest at "
            f"{points.loc[top, 'name']} ({units(means.loc[top, column])}).")
    if never:
        lines.append(f"- {what} under {', '.join(never)}: zero in all {len(table)} runs.")
    return lines


excess = faults_table["settlement_loss_excess_units"]
gap = (faults_table["settlement_loss_units"] - faults_table["settlement_loss_true_units"]).mean()
excess_verdict = ("is **0 in every run**: the reported loss is the true loss plus the billing "
                  "loss of settled leases, exactly" if not (excess != 0).any() else
                  f"is nonzero in {int((excess != 0).sum())} of {len(excess)} runs (the "
                  f"ledger's own; largest {units(excess.abs().max())} units)")
display(Markdown("\n".join([
    *cause_lines(faults_table, "billing_loss_units_by_", "Billing loss"),
    *cause_lines(faults_table, "units_stranded_by_", "Units stranded"),
    f"- Settlement loss: the ledger reported {units(gap)} units per run more than the true "
    f"loss, on average; `settlement_loss_excess_units` (what no billing loss explains) "
    f"{excess_verdict}.",
])))

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
kinds = [point.parameters[STORE] for point in exchange_sweep.points]
reference = kinds[0]
refusal_columns = causes_of(exchange_table, "spends_refused_by_")
by_store = exchange_table.groupby(STORE)
figure = Figure(figsize=(4.2 * 3, 4.6), layout="constrained")
refused_ax, below_ax, shortfall_ax = figure.subplots(1, 3)
means = by_store[refusal_columns].mean().reindex(kinds).fillna(0)
bottom = np.zeros(len(kinds))
for column in refusal_columns:
    values = means[column].to_numpy()
    if values.any():
        refused_ax.bar(range(len(kinds)), values, bottom=bottom,
                       label=column.removeprefix("spends_refused_by_"))
        bottom += values
refused_ax.set_title("Spends refused, by refusal", fontsize=10)
refused_ax.legend(fontsize=8, loc="lower right")
for ax, metric, title in ((below_ax, "regrants_below_credit", "Re-grants below credit"),
                          (shortfall_ax, "regrant_shortfall_units", "Regrant shortfall (units)")):
    ax.bar(range(len(kinds)), by_store[metric].mean().reindex(kinds), alpha=0.6)
    ax.set_title(title, fontsize=10)
for ax, metric in ((refused_ax, "spends_refused"), (below_ax, "regrants_below_credit"),
                   (shortfall_ax, "regrant_shortfall_units")):
    for x, kind in enumerate(kinds):
        runs = exchange_table[exchange_table[STORE] == kind][metric]
        ax.plot([x] * len(runs), runs, "o", color="black", markersize=3)
    ax.set_xticks(range(len(kinds)), [kind.replace("tollgate.", "").replace("_", "\n", 1)
                                      for kind in kinds], fontsize=8)
    ax.set_ylabel("per run")
    ax.grid(True, axis="y", alpha=0.3)
figure.suptitle(f"Each account funded with {units(exchange_deposit)} units (mean over "
                f"{len(exchange_sweep.seeds)} seeds; dots: seeds)", fontsize=11)
show(figure, "consolidate-vs-release-then-acquire")


def exchange_lines(table):
    """Per store: its re-grants below credit and shortfall; against the reference,
    seed by seed, the spends it refused."""
    paired = table.pivot(index="seed", columns=STORE)
    lines = []
    for kind in kinds:
        runs = table[table[STORE] == kind]
        short, below = runs["regrant_shortfall_units"], runs["regrants_below_credit"]
        if not (below != 0).any():
            regrants = f"re-granted below credit in none of its {len(runs)} runs"
        else:
            regrants = (f"re-granted below credit in {int((below != 0).sum())} of {len(runs)} "
                        f"runs, a median of {below.median():,.0f} times per run, "
                        f"{units(short.median())} units short in all (median; "
                        f"{units(short.sum() / below.sum())} per short re-grant, "
                        f"{short.sum() / runs['units_consumed'].sum():.2%} of the units "
                        f"consumed)")
        refused = (f"refused a median of {runs['spends_refused'].median():,.0f} spends and "
                   f"admitted {runs['spends_admitted'].median():,.0f}, consuming "
                   f"{units(runs['units_consumed'].median())} units")
        if kind != reference:
            more = paired["spends_refused"][kind] - paired["spends_refused"][reference]
            consumed = paired["units_consumed"][kind] - paired["units_consumed"][reference]
            refused += (f"; against `{reference}` it refused more spends on "
                        f"{int((more > 0).sum())} of {len(more)} seeds, fewer on "
                        f"{int((more < 0).sum())} (median difference {more.median():+,.0f}), "
                        f"and consumed fewer units on {int((consumed < 0).sum())} of "
                        f"{len(consumed)} seeds (median difference {consumed.median():+,.0f})")
        lines.append(f"- `{kind}` {regrants}; it {refused}.")
    return lines


display(Markdown("\n".join(exchange_lines(exchange_table))))

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

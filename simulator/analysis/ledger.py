"""The lease ledger: what the tollgate sweeps say about where a ledger's units
go (notebook ``08_ledger_conservation``). Compute only; the figures are in
``simulator.analysis.ledger_figures``.

Holders fund their spends from leases on one tollgate ledger while replicas
crash and replies are lost. The notebook asks three things, each answered
here from the runs' results:

* **the conservation equation over time** — ``conservation_runs`` reads
  every run's aggregate samples of the equation's terms (``TERMS_RIGHT``
  against ``deposited + overage``) and picks the run to draw: the point whose
  runs saw the most faults. ``conservation_text`` says where that run's
  units ended up and whether the residual left zero anywhere;
* **losses by cause as faults grow** — ``fault_points`` orders the fault
  sweep's points (crash rate × reply loss) and names them; ``cause_lines``
  and ``settlement_line`` say, per cause, what billing loss, stranded units
  and settlement loss cost from the calmest point to the harshest;
* **consolidate against release-then-acquire** — ``exchange_lines`` sets
  each holder's re-grants below credit, and the spends it refused, beside
  the reference holder's, seed by seed.

A ledger table (``ledger_table``) has one row per run: ``point``, ``seed``,
the sweep's varied fields by their dotted paths (``CRASH_RATE``,
``REPLY_LOSS``, ``STORE``) and every summary metric of the family
(``docs/metrics.md``, "Lease ledger"). Everything is deterministic: no
randomness, only the runs' results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from simulator.analysis import lab_path
from simulator.scenario.model import read_toml
from simulator.sweeps import Sweep, build_sweep

# ------------------------------------------------------------------ columns

POINT, SEED = "point", "seed"

CRASH_RATE = "faults.crash.rate"
"""Column: replica crashes per replica, as written (``"60/h"``)."""

REPLY_LOSS = "network.reply_loss"
"""Column: the share of replies lost (0..1)."""

STORE = "store"
"""Column: the store kind of the run (the holder and ledger it ran)."""

DEPOSIT = "store_settings.deposit"
"""The scenario field: units deposited per account."""

FAULT_SWEEP, EXCHANGE_SWEEP = "ledger-fault-rates", "ledger-exchange"
"""The two sweeps' names (their results folders start with them)."""

MILLION = 1_000_000

TERMS_RIGHT = ("balance", "active_lease_grants", "settled_usage", "settlement_loss", "expired")
"""The right side of the equation, as ``metrics.parquet`` names its terms."""

BILLING_LOSS = "billing_loss_units_by_"
"""Prefix of the summary's billing loss by cause (units consumed, never billed)."""

STRANDED = "units_stranded_by_"
"""Prefix of the summary's units stranded by cause (no holder until the TTL reclaim)."""

REFUSED = "spends_refused_by_"
"""Prefix of the summary's spends refused by refusal."""

# ------------------------------------------------------------------ the sweeps


def fault_rate_sweep(scenario_file: str, seeds: int | Sequence[int], crash_rates: Sequence[str],
                     reply_losses: Sequence[float], set_fields: Mapping[str, Any] | None = None,
                     backend: str | None = None) -> Sweep:
    """Replica crash rate × reply loss over ``scenario_file`` (relative: in the
    lab's checkout), with ``set_fields`` (dotted paths) at every point."""
    return _sweep(FAULT_SWEEP, scenario_file, seeds, dict(set_fields or {}),
                  {CRASH_RATE: list(crash_rates), REPLY_LOSS: list(reply_losses)}, backend)


def exchange_sweep(scenario_file: str, seeds: int | Sequence[int], stores: Sequence[str],
                   deposit: int, set_fields: Mapping[str, Any] | None = None,
                   backend: str | None = None) -> Sweep:
    """The holders ``stores`` side by side (the reference first) over
    ``scenario_file``, each account funded with ``deposit`` units."""
    return _sweep(EXCHANGE_SWEEP, scenario_file, seeds,
                  {**(set_fields or {}), DEPOSIT: deposit}, {STORE: list(stores)}, backend)


def _sweep(name: str, scenario_file: str, seeds: int | Sequence[int], set_fields: dict[str, Any],
           vary: dict[str, list[Any]], backend: str | None) -> Sweep:
    base = read_toml(lab_path(scenario_file))
    return build_sweep({"name": name, "seeds": seeds if isinstance(seeds, int) else list(seeds),
                        "backend": backend, "set": set_fields, "vary": vary},
                       base, source=scenario_file)


def ledger_table(results: pd.DataFrame, sweep: Sweep) -> pd.DataFrame:
    """A ledger sweep's results (``simulator.sweeps.read_results``) as a
    ledger table: only the runs of the sweep's points and seeds (a folder may
    hold a wider earlier run), with the refusals a run never met at zero (a
    run's summary names only the refusals it met)."""
    refusals = causes_of(results, REFUSED)
    table = results.assign(**{column: results[column].fillna(0) for column in refusals})
    wanted = {point.point_id for point in sweep.points}
    return table[table[POINT].isin(wanted) & table[SEED].isin(sweep.seeds)].reset_index(drop=True)


def exchange_kinds(sweep: Sweep) -> list[str]:
    """The store kinds of an exchange sweep, in its order (the reference first)."""
    return [point.parameters[STORE] for point in sweep.points]


# ------------------------------------------------------------------ shaping a table


def causes_of(table: pd.DataFrame, prefix: str) -> list[str]:
    """The summary's ``PREFIX<cause>`` columns, in the summary's order."""
    return [column for column in table.columns if column.startswith(prefix)]


def means_by(table: pd.DataFrame, by: str, columns: Sequence[str],
             order: Iterable[Any] | None = None) -> pd.DataFrame:
    """The mean over seeds of each of ``columns`` per value of ``by``, in
    ``order`` when given (a value with no runs: NaN), else sorted."""
    means = table.groupby(by)[list(columns)].mean()
    return means if order is None else means.reindex(list(order))


def runs_by(table: pd.DataFrame, by: str, column: str, order: Iterable[Any]) -> list[pd.Series]:
    """Each run's ``column`` per value of ``by``, in ``order``: one dot a seed."""
    return [table[table[by] == value][column] for value in order]


def units(value: float) -> str:
    """Units as a reader takes them in: millions past a million."""
    return f"{value / MILLION:,.2f} M" if abs(value) >= MILLION else f"{value:,.0f}"


# ------------------------------------------------------------------ the fault sweep's points


def faults_seen(table: pd.DataFrame) -> pd.Series:
    """Faults the lab injected per run: crashes plus replies lost."""
    return table["fault_crash_count"] + table["reply_lost_count"]


def point_label(crash_rate: str, reply_loss: float, between: str = "\n") -> str:
    """A point of the fault sweep in words: ``"crashes 60/h, reply loss 1%"``."""
    return f"crashes {crash_rate}{between}reply loss {reply_loss * 100:g}%"


def fault_points(table: pd.DataFrame, sweep: Sweep) -> pd.DataFrame:
    """The fault sweep's points that have runs, in grid order, indexed by
    point: its crash rate and reply loss, the mean ``faults`` its runs saw,
    its ``label`` on a figure's axis and its ``name`` in a sentence."""
    seen = (table.assign(faults=faults_seen(table))
            .groupby(POINT, sort=False)
            .agg(**{CRASH_RATE: (CRASH_RATE, "first"), REPLY_LOSS: (REPLY_LOSS, "first"),
                    "faults": ("faults", "mean")}))
    points = seen.loc[[point.point_id for point in sweep.points if point.point_id in seen.index]]
    pairs = list(zip(points[CRASH_RATE], points[REPLY_LOSS], strict=True))
    return points.assign(label=[point_label(crash, loss) for crash, loss in pairs],
                         name=[point_label(crash, loss, between=", ") for crash, loss in pairs])


def calmest(points: pd.DataFrame) -> str:
    """The point whose runs saw the fewest faults (the first in grid order on a tie)."""
    return points["faults"].idxmin()


def harshest(points: pd.DataFrame) -> str:
    """The point whose runs saw the most faults (the first in grid order on a tie)."""
    return points["faults"].idxmax()


# ------------------------------------------------------------------ the equation over time


@dataclass(frozen=True, eq=False)
class ConservationRuns:
    """The equation's samples of a fault sweep: every run's aggregate rows
    (``every_run``), and the run drawn over time (``drawn``, by time): the
    harshest point's run of ``seed``."""

    every_run: pd.DataFrame
    drawn: pd.DataFrame
    point: str
    point_name: str
    seed: int
    points: int
    """How many points the sweep has."""
    seeds: int
    """How many seeds the sweep has."""


def conservation_runs(metrics: pd.DataFrame, points: pd.DataFrame, sweep: Sweep,
                      series_seed: int | None = None) -> ConservationRuns:
    """The runs' metric series (``simulator.sweeps.read_metrics``) of the
    ``fault_points``: the aggregate rows (every account at once) of the
    sweep's seeds, and the run of ``series_seed`` (None: the sweep's first)
    at the harshest point."""
    every_run = metrics[(metrics["namespace"] == "*") & metrics[POINT].isin(points.index)
                        & metrics[SEED].isin(sweep.seeds)]
    seed = sweep.seeds[0] if series_seed is None else series_seed
    point = harshest(points)
    drawn = every_run[(every_run[POINT] == point)
                      & (every_run[SEED] == seed)].sort_values("time_us")
    if drawn.empty:
        raise ValueError(f"series_seed: no samples of seed {seed} at "
                         f"{points.loc[point, 'name']}; the sweep's seeds are "
                         f"{', '.join(map(str, sweep.seeds))}")
    return ConservationRuns(every_run, drawn, point, points.loc[point, "name"], seed,
                            len(sweep.points), len(sweep.seeds))


def drawn_run_text(runs: ConservationRuns, table: pd.DataFrame) -> str:
    """Where the drawn run's units sit at its end, the most out on leases at
    once, and what the holders consumed against what the ledger billed."""
    end = runs.drawn.iloc[-1]
    drawn = table[(table[POINT] == runs.point) & (table[SEED] == runs.seed)].iloc[0]
    peak = runs.drawn.loc[runs.drawn["active_lease_grants"].idxmax()]
    return (
        f"**The run drawn** ({runs.point_name}, seed "
        f"{runs.seed}: {int(drawn['fault_crash_count'])} crashes, "
        f"{int(drawn['reply_lost_count'])} replies lost). Of {units(end['deposited'])} units "
        f"deposited (+ {units(end['overage_recorded'])} overage), at the end "
        f"{units(end['balance'])} sit in the balance, {units(end['settled_usage'])} were billed "
        f"as settled usage, {units(end['settlement_loss'])} written off as settlement loss, "
        f"{units(end['expired'])} expired, and {units(end['active_lease_grants'])} are still out "
        f"on active leases. At most {units(peak['active_lease_grants'])} units were out on leases "
        f"at once (at {peak['time_us'] / 1e6:.0f} s). The holders consumed "
        f"{units(end['units_consumed'])} units; the ledger billed {units(end['units_billed'])}, "
        f"{units(end['units_consumed'] - end['units_billed'])} short.")


def residual_text(runs: ConservationRuns, table: pd.DataFrame) -> str:
    """Whether the residual left zero at any sample of any run, and after
    any transaction (the oracle checks each one)."""
    samples = runs.every_run
    nonzero_runs = samples.groupby([POINT, SEED])["residual_units"].apply(
        lambda residual: bool((residual != 0).any()))
    worst_transaction = int(table["conservation_residual_max_units"].max())
    violations = int(table["conservation_violations"].sum())
    residual_verdict = (
        f"was **0 at every one of the {len(samples):,} samples of all {len(nonzero_runs)} runs**"
        if not nonzero_runs.any() else
        f"left zero in **{int(nonzero_runs.sum())} of {len(nonzero_runs)} runs** (largest "
        f"|residual| at a sample: {units(samples['residual_units'].abs().max())} units)")
    transaction_verdict = (
        "and after every transaction of every run (the oracle checks each one): no violation"
        if worst_transaction == 0 and violations == 0 else
        f"and after the transactions: {violations} violations, the worst residual "
        f"{units(worst_transaction)} units")
    return (f"**The residual** `deposited + overage − (balance + active lease grants + settled "
            f"usage + settlement loss + expired)` {residual_verdict}, {transaction_verdict}.")


def conservation_text(runs: ConservationRuns, table: pd.DataFrame) -> str:
    """The drawn run, then the residual's verdict (Markdown)."""
    return f"{drawn_run_text(runs, table)}\n\n{residual_text(runs, table)}"


# ------------------------------------------------------------------ losses by cause


def cause_lines(table: pd.DataFrame, prefix: str, what: str, points: pd.DataFrame) -> list[str]:
    """One sentence per cause of ``prefix``: its mean per run at the calmest
    and the harshest point, and where it is largest; the causes zero in every
    run together."""
    means = means_by(table, POINT, causes_of(table, prefix))
    low, high = calmest(points), harshest(points)
    lines, never = [], []
    for column in means.columns:
        cause = column.removeprefix(prefix)
        if not (table[column] != 0).any():
            never.append(f"`{cause}`")
            continue
        top = means[column].idxmax()
        lines.append(
            f"- {what} under `{cause}`: {units(means.loc[low, column])} per run at "
            f"{points.loc[low, 'name']}, "
            f"{units(means.loc[high, column])} at "
            f"{points.loc[high, 'name']}; largest at "
            f"{points.loc[top, 'name']} ({units(means.loc[top, column])}).")
    if never:
        lines.append(f"- {what} under {', '.join(never)}: zero in all {len(table)} runs.")
    return lines


def settlement_line(table: pd.DataFrame) -> str:
    """The settlement loss the ledger reported against the true loss, and
    whether any of it is the ledger's own (``settlement_loss_excess_units``)."""
    excess = table["settlement_loss_excess_units"]
    gap = (table["settlement_loss_units"] - table["settlement_loss_true_units"]).mean()
    excess_verdict = ("is **0 in every run**: the reported loss is the true loss plus the "
                      "billing loss of settled leases, exactly" if not (excess != 0).any() else
                      f"is nonzero in {int((excess != 0).sum())} of {len(excess)} runs (the "
                      f"ledger's own; largest {units(excess.abs().max())} units)")
    return (f"- Settlement loss: the ledger reported {units(gap)} units per run more than the "
            f"true loss, on average; `settlement_loss_excess_units` (what no billing loss "
            f"explains) {excess_verdict}.")


def loss_text(table: pd.DataFrame, points: pd.DataFrame) -> str:
    """Billing loss and units stranded by cause, then settlement loss (Markdown)."""
    return "\n".join([*cause_lines(table, BILLING_LOSS, "Billing loss", points),
                      *cause_lines(table, STRANDED, "Units stranded", points),
                      settlement_line(table)])


# ------------------------------------------------------------------ the exchange


def exchange_lines(table: pd.DataFrame, kinds: Sequence[str]) -> list[str]:
    """Per store of ``kinds``: its re-grants below credit and their shortfall,
    the spends it refused and admitted; against the reference (``kinds[0]``),
    seed by seed, the spends it refused and the units it consumed."""
    reference = kinds[0]
    paired = table.pivot(index=SEED, columns=STORE,
                         values=["spends_refused", "units_consumed"])
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

"""The ledger notebook runs end to end on two tiny sweeps, writes its figures
as PNGs, and its conclusions are what its runs give: the equation's residual
zero at every sample on the fixed ledger, nothing lost without a fault, and
the release-then-acquire holder re-granted less than it gave back where the
consolidating one never is."""

from __future__ import annotations

from pathlib import Path

from notebook_runner import execute_notebook, figures_of, outputs_of

from simulator.analysis import ledger
from simulator.sweeps import read_metrics, read_results

NAME = "08_ledger_conservation"
FIGURES = ("conservation-terms-over-time", "losses-by-cause-vs-fault-rates",
           "consolidate-vs-release-then-acquire")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
LEDGER, COMPOSING = "tollgate.ledger", "tollgate.variants.release_then_acquire"


def small_parameters(tmp_path: Path) -> dict:
    """Two seeds, no fault or crashes with lost replies, twenty virtual
    seconds of spends (and the drain that settles every lease), accounts
    funded with less than their spends ask for in the side-by-side: about a
    second of work per run, 8 + 4 runs."""
    return {
        "seeds": 2,
        "crash_rates": ["0/h", "240/h"],
        "reply_losses": [0.0, 0.05],
        "exchange_deposit": 3_000_000,
        "set_fields": {"duration": "20s", "drain": "45s"},
        "results_dir": str(tmp_path / "results"),
        "workers": 2,
    }


def folder(root: Path, sweep: str) -> Path:
    """The one results folder the notebook ran ``sweep`` into."""
    found = sorted(root.glob(f"{sweep}-*"))
    assert len(found) == 1, found
    return found[0]


def test_the_notebook_draws_and_concludes_what_its_runs_give(tmp_path: Path):
    notebook = execute_notebook(NAME, small_parameters(tmp_path), tmp_path)
    assert len(figures_of(notebook)) == len(FIGURES)
    root = tmp_path / "results"
    for name in FIGURES:
        assert (root / "figures" / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE), name
    displayed = [output["data"]["text/markdown"] for output in outputs_of(notebook, "display_data")
                 if "text/markdown" in output["data"]]
    conclusions = "\n".join(displayed)

    # The fixed ledger keeps its equation at every sample of every run, faults or not.
    faults = read_results(folder(root, "ledger-fault-rates"))
    assert len(faults) == 2 * 2 * 2
    series = read_metrics(folder(root, "ledger-fault-rates"))
    aggregate = series[series["namespace"] == "*"]
    assert (aggregate["residual_units"] == 0).all()
    assert (faults["conservation_residual_max_units"] == 0).all()
    assert f"was **0 at every one of the {len(aggregate):,} samples of all 8 runs**" in conclusions

    # Nothing is the ledger's, and without a fault nothing is lost at all.
    assert (faults["billing_loss_units_by_store_logic"] == 0).all()
    assert (faults["settlement_loss_excess_units"] == 0).all()
    assert "`settlement_loss_excess_units` (what no billing loss explains) is **0 in every run**" \
        in conclusions
    quiet = faults[(faults["faults.crash.rate"] == "0/h") & (faults["network.reply_loss"] == 0)]
    assert (quiet[["billing_loss_units", "units_stranded"]] == 0).all().all()
    crashing = faults[faults["faults.crash.rate"] == "240/h"]
    assert (crashing["billing_loss_units_by_holder_crashed"] > 0).all()

    # Side by side near exhaustion: only release-then-acquire re-grants below credit.
    exchange = read_results(folder(root, "ledger-exchange"))
    by_store = {kind: runs for kind, runs in exchange.groupby("store")}
    assert set(by_store) == {LEDGER, COMPOSING}
    assert (by_store[LEDGER]["regrant_shortfall_units"] == 0).all()
    assert (by_store[COMPOSING]["regrant_shortfall_units"] > 0).all()
    assert f"`{LEDGER}` re-granted below credit in none of its 2 runs" in conclusions
    assert f"`{COMPOSING}` re-granted below credit in 2 of 2 runs" in conclusions
    paired = exchange.pivot(index="seed", columns="store", values="spends_refused")
    more = int((paired[COMPOSING] > paired[LEDGER]).sum())
    assert f"it refused more spends on {more} of 2 seeds" in conclusions

    # Every conclusion it displayed is what the tested analysis gives for its runs.
    parameters = small_parameters(tmp_path)
    fault_sweep = ledger.fault_rate_sweep(
        "data/scenarios/tollgate.toml", 2, parameters["crash_rates"], parameters["reply_losses"],
        set_fields=parameters["set_fields"])
    exchange_sweep = ledger.exchange_sweep(
        "data/scenarios/tollgate.toml", 2, [LEDGER, COMPOSING], parameters["exchange_deposit"],
        set_fields=parameters["set_fields"])
    table = ledger.ledger_table(faults, fault_sweep)
    points = ledger.fault_points(table, fault_sweep)
    runs = ledger.conservation_runs(series, points, fault_sweep)
    assert displayed == [
        ledger.conservation_text(runs, table), ledger.loss_text(table, points),
        "\n".join(ledger.exchange_lines(ledger.ledger_table(exchange, exchange_sweep),
                                        ledger.exchange_kinds(exchange_sweep)))]

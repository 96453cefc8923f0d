"""Notebook 10 (a Redis Cluster's shards) runs end to end on tiny sweeps,
writes its figures as PNGs and prints what the analysis computes from its runs."""

from __future__ import annotations

from pathlib import Path

from notebook_runner import execute_notebook, figures_of, printed_by

from simulator.analysis import shards
from simulator.sweeps import read_results, results_dir_for

NAME = "10_cluster_shards"
FIGURES = ("failover-budget", "failover-leases", "hot-shard")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SET_FIELDS = {"duration": "6s", "drain": "2s", "fleet.replicas": 30}
FAILOVERS = {"axond_budget": "data/sweeps/shard-failover-budget.toml",
             "axond_leases": "data/sweeps/shard-failover-leases.toml"}
HOT = ["data/sweeps/shard-hot-namespace-v1.toml", "data/sweeps/shard-hot-namespace-v2.toml"]


def small_parameters(tmp_path: Path) -> dict:
    """One seed, two lags on two shards, two subject counts in one namespace."""
    return {"seeds": 1, "lags": ["0s", "1s"], "shards_hit": [0, 1], "subjects": [1, 30],
            "namespaces": [1], "set_fields": SET_FIELDS,
            "results_dir": str(tmp_path / "results"), "workers": 2}


def test_the_notebook_draws_every_figure_and_prints_what_its_runs_give(tmp_path: Path):
    parameters = small_parameters(tmp_path)
    notebook = execute_notebook(NAME, parameters, tmp_path)
    assert len(figures_of(notebook)) == len(FIGURES)
    root = tmp_path / "results"
    for name in FIGURES:
        assert (root / "figures" / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE), name
    printed = printed_by(notebook).splitlines()

    def table(path: str, **values) -> object:
        sweep = shards.load_shard_sweep(path, seeds=1, set_fields=SET_FIELDS, **values)
        return shards.shard_table(read_results(results_dir_for(sweep, root)), sweep)

    expected = []
    for family, path in FAILOVERS.items():
        failover = table(path, lags=["0s", "1s"], shards_hit=[0, 1])
        assert sorted(failover[shards.SHARD].unique()) == [0, 1]
        assert sorted(failover[shards.LAG].unique()) == [0.0, 1.0]
        expected += shards.failover_lines(failover, family)
    hot = shards.hot_shard_table([table(path, subjects=[1, 30], namespaces=[1])
                                  for path in HOT])
    expected += shards.hot_shard_lines(hot)
    assert [line for line in printed if line.startswith(("axond_", "axond_budget."))] == expected
    # v2 keeps its one namespace on one shard; v1 spreads 30 subjects.
    v1, v2 = (hot[(hot[shards.STORE] == f"axond_budget.redis_{layout}")
                  & (hot[shards.SUBJECTS] == 30)][shards.BUSIEST].item()
              for layout in ("v1", "v2"))
    assert v2 > 0.9 > 0.6 > v1

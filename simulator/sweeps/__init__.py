"""Sweeps: one scenario over a grid (or random design) of parameters × seeds.

The API the CLI and the notebooks share::

    from simulator.sweeps import load_sweep, run_sweep, read_results
    sweep = load_sweep("data/sweeps/overshoot-vs-faults.toml")
    run_sweep(sweep, "data/results/sweeps/overshoot-vs-faults", workers=4)
    frame = read_results("data/results/sweeps/overshoot-vs-faults")
"""

from simulator.sweeps.design import Point, Range, Sweep, SweepFile, Task, build_sweep, load_sweep
from simulator.sweeps.execute import SweepInterrupted, SweepOutcome, run_sweep
from simulator.sweeps.results import ResultsDir, read_metrics, read_results, results_dir_for

__all__ = [
    "Point", "Range", "ResultsDir", "Sweep", "SweepFile", "SweepInterrupted", "SweepOutcome",
    "Task", "build_sweep", "load_sweep", "read_metrics", "read_results", "results_dir_for",
    "run_sweep",
]

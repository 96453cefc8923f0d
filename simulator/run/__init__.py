"""One run, composed: preflight, the work estimate and its guard, metrics
sampling, and the summary.

``compose`` (``run_scenario``), ``preflight`` (what a run is checked for
before it starts), ``estimate`` (the work a scenario will be), ``limits``
(the guard), ``metrics`` (``metrics.parquet``).

``simulator.run.run_scenario`` and ``RunResult`` are ``compose``'s, re-exported
here as they always were importable.
"""

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # Lazily: importing ``simulator.run.limits`` must not compose a whole run.
    if name.startswith("__"):
        raise AttributeError(name)
    module = importlib.import_module("simulator.run.compose")
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module 'simulator.run' has no attribute {name!r}") from None

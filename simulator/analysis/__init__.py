"""What the notebooks compute from results, in code that is tested.

Each notebook asks one question; the module of the same name here turns a
sweep's results (or a replay) into the numbers and figures that answer it, so
no logic lives only in a notebook. ``lab_path`` finds the lab's own files
(scenarios, sweeps, race reports) wherever the notebook runs from.
"""

from pathlib import Path

LAB_ROOT = Path(__file__).resolve().parents[2]
"""The lab's checkout: the directory holding ``data/``, ``notebooks/`` and ``simulator/``."""


def lab_path(*parts: str) -> Path:
    """A path inside the lab's checkout, e.g. ``lab_path("data", "races")``."""
    return LAB_ROOT.joinpath(*parts)

"""The lab's simulator: one package per layer (``docs/design-notes.md``, "Layers").

``LAB_ROOT`` and ``lab_path`` say where the lab's own files are (scenarios,
sweeps, race reports, workloads) wherever the lab runs from; every layer may
use them.
"""

# The compiled hot path, when a current build exists (simulator.compiled says
# when it is used); this must run before any other module of the package loads.
from simulator.compiled import install as _install_compiled_hot_path

_install_compiled_hot_path()

from pathlib import Path  # noqa: E402  (after the hot path's finder, which must be first)

LAB_ROOT = Path(__file__).resolve().parent.parent
"""The lab's checkout: the directory holding ``data/``, ``notebooks/`` and ``simulator/``."""


def lab_path(*parts: str) -> Path:
    """A path inside the lab's checkout, e.g. ``lab_path("data", "races")``."""
    return LAB_ROOT.joinpath(*parts)

"""What the notebooks compute from results, in code that is tested.

Each notebook asks one question; the module of the same name here turns a
sweep's results (or a replay) into the numbers and figures that answer it, so
no logic lives only in a notebook. ``lab_path`` finds the lab's own files
(scenarios, sweeps, race reports) wherever the notebook runs from.
"""

import io
from pathlib import Path

from matplotlib.figure import Figure

LAB_ROOT = Path(__file__).resolve().parents[2]
"""The lab's checkout: the directory holding ``data/``, ``notebooks/`` and ``simulator/``."""


def lab_path(*parts: str) -> Path:
    """A path inside the lab's checkout, e.g. ``lab_path("data", "races")``."""
    return LAB_ROOT.joinpath(*parts)


def notebook_results_dir(notebook: str, results_dir: str | Path | None = None) -> Path:
    """Where a notebook keeps its runs: ``results_dir`` when given, else
    ``data/results/notebooks/NOTEBOOK`` in the lab's checkout."""
    if results_dir is not None:
        return Path(results_dir)
    return lab_path("data", "results", "notebooks", notebook)


def figure_png(figure: Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes: displayable with ``IPython.display.Image``
    whatever matplotlib backend the kernel ended up with (the timeline
    module selects Agg on import, which keeps Jupyter's inline hook from
    registering)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def kept_png(figure: Figure, directory: Path, name: str) -> bytes:
    """The figure as PNG bytes (``figure_png``), also written as
    ``DIRECTORY/NAME.png``: a notebook displays a figure and keeps it beside
    its runs in one call."""
    png = figure_png(figure)
    (directory / f"{name}.png").write_bytes(png)
    return png

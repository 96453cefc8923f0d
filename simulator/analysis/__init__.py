"""What the notebooks compute from results, in code that is tested.

Each notebook asks one question; the module of the same name here turns a
sweep's results (or a replay) into the numbers and figures that answer it, so
no logic lives only in a notebook. ``lab_path`` finds the lab's own files
(scenarios, sweeps, race reports) wherever the notebook runs from;
``kept_figure`` writes a figure as PNG beside a notebook's runs and displays
it with its alternative text.
"""

import base64
import html
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from simulator import LAB_ROOT, lab_path  # noqa: F401  (the notebooks' way to the lab's files)


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


def figures_dir(results_dir: Path) -> Path:
    """Where a notebook keeps its figures as PNG: ``RESULTS_DIR/figures``
    (created)."""
    directory = Path(results_dir) / "figures"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def figure_description(figure: Figure) -> str:
    """What the figure plots, from its own title and its panels' titles and
    axis labels (e.g. ``Titled "Cap overshoot". Panels: "vs crashes" (x: crash
    rate; y: % of cap).``): the part of a figure's alternative text that
    stays true whatever the data."""
    panels = []
    for axes in figure.get_axes():
        axis_labels = [f"{axis}: {label}" for axis, label in
                       (("x", axes.get_xlabel()), ("y", axes.get_ylabel())) if label]
        if axes.get_title() or axis_labels:
            panel = f'"{axes.get_title()}"' if axes.get_title() else "untitled"
            panels.append(f"{panel} ({'; '.join(axis_labels)})" if axis_labels else panel)
    parts = [f'Titled "{figure.get_suptitle()}".' if figure.get_suptitle() else "",
             f"Panels: {', '.join(panels)}." if panels else ""]
    return " ".join(part for part in parts if part)


@dataclass(frozen=True)
class KeptFigure:
    """A figure kept as PNG beside a notebook's runs, displayed with its
    alternative text. It displays as an ``<img alt=...>`` (which JupyterLab
    shows and nbconvert's HTML export keeps: the export drops the ``alt`` of a
    bare PNG output), with the PNG itself and the text as fallbacks."""

    png: bytes
    alt: str
    path: Path

    def _repr_mimebundle_(self, include: Any = None,
                          exclude: Any = None) -> tuple[dict[str, str], dict[str, Any]]:
        encoded = base64.b64encode(self.png).decode("ascii")
        image = (f'<img src="data:image/png;base64,{encoded}" '
                 f'alt="{html.escape(self.alt, quote=True)}"/>')
        return ({"text/html": image, "image/png": encoded, "text/plain": self.alt},
                {"image/png": {"alt": self.alt}})


def kept_figure(figure: Figure, directory: Path, name: str, alt: str) -> KeptFigure:
    """The figure written as ``DIRECTORY/NAME.png`` (``kept_png``), to display
    with ``alt`` (what it shows, in a sentence) followed by its titles and
    axes (``figure_description``) as alternative text."""
    # One line: titles broken over lines read as one sentence each.
    text = " ".join(f"{alt} {figure_description(figure)}".split())
    return KeptFigure(kept_png(figure, directory, name), text, directory / f"{name}.png")

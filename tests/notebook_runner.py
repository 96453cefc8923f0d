"""Executing a notebook of ``notebooks/`` the way papermill runs it for users:
the text notebook (jupytext percent format) is read, its ``parameters`` cell
overridden, and every cell run in a fresh ``python3`` kernel from the lab's
root. A cell that raises fails the test with the cell's traceback.

Every executed notebook is also held to what any reader of it needs: each
figure it displayed was written as a PNG under its results directory and
carries alternative text, and its export to HTML (nbconvert, as a reader
shares it) keeps that text and shows every progress bar in its final state."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jupytext
import nbconvert
import nbformat
import papermill

from simulator.analysis import notebook_results_dir

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PROGRESS_COUNT = re.compile(r"\|\s*(\d+)/(\d+) \[")
"""A tqdm text bar's ``| n/total [`` (the bar, then the count)."""


def execute_notebook(name: str, parameters: dict[str, Any], out_dir: Path,
                     timeout_s: int = 300) -> nbformat.NotebookNode:
    """Run ``notebooks/NAME.py`` with ``parameters``; return the executed notebook
    (also written to ``out_dir/NAME.ipynb``, and its HTML export to
    ``out_dir/NAME.html``, for inspection), after checking its figures were
    kept with alternative text and its HTML export keeps what it showed."""
    notebook = jupytext.read(NOTEBOOKS / f"{name}.py")
    tagged = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{name}: expected one cell tagged 'parameters', found {len(tagged)}"
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / f"{name}.ipynb"
    executed = papermill.execute_notebook(
        notebook, str(output), parameters=parameters, kernel_name="python3", language="python",
        cwd=str(NOTEBOOKS.parent), progress_bar=False, execution_timeout=timeout_s)
    alts = kept_figure_alts(executed, notebook_results_dir(name, parameters.get("results_dir")))
    exported = exported_html(executed)
    (out_dir / f"{name}.html").write_text(exported)
    check_html_export(exported, alts)
    return executed


def outputs_of(notebook: nbformat.NotebookNode, kind: str) -> list[Any]:
    """Every output of type ``kind`` (``display_data``, ``stream``...) in the notebook."""
    return [output for cell in notebook.cells if cell.cell_type == "code"
            for output in cell.get("outputs", []) if output.get("output_type") == kind]


def figures_of(notebook: nbformat.NotebookNode) -> list[Any]:
    """The PNG figures the notebook displayed, after checking no cell errored."""
    assert not outputs_of(notebook, "error"), outputs_of(notebook, "error")
    return [output for output in outputs_of(notebook, "display_data")
            if "image/png" in output.get("data", {})]


def tables_of(notebook: nbformat.NotebookNode) -> list[Any]:
    """The HTML the notebook displayed other than its figures (its tables)."""
    return [output["data"]["text/html"] for output in outputs_of(notebook, "display_data")
            if "text/html" in output.get("data", {}) and "image/png" not in output["data"]]


def printed_by(notebook: nbformat.NotebookNode) -> str:
    """Everything the notebook's cells printed."""
    return "".join(output.get("text", "") for output in outputs_of(notebook, "stream"))


def kept_figure_alts(notebook: nbformat.NotebookNode, results_dir: Path) -> list[str]:
    """The alternative text of every figure the notebook displayed, after
    checking it displayed at least one, each as an ``<img alt=...>`` with
    text, and each also written as a PNG under ``RESULTS_DIR/figures/``."""
    figures = figures_of(notebook)
    assert figures, "the notebook displayed no figure"
    written = {path.read_bytes() for path in (results_dir / "figures").glob("*.png")}
    alts = []
    for figure in figures:
        png = base64.b64decode(figure["data"]["image/png"])
        assert png in written, f"a figure displayed was not written under {results_dir}/figures"
        alt = image_alts(figure["data"].get("text/html", ""))
        assert len(alt) == 1 and alt[0].strip(), "a figure displayed has no alt text"
        alts.extend(alt)
    return alts


def image_alts(markup: str) -> list[str]:
    """The alternative text of every ``<img>`` in the HTML, in order."""
    class Images(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.alts: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "img":
                self.alts.append(dict(attrs).get("alt") or "")

    parser = Images()
    parser.feed(markup)
    return parser.alts


def exported_html(notebook: nbformat.NotebookNode) -> str:
    """The executed notebook exported to HTML by nbconvert."""
    body, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
    return body


def check_html_export(exported: str, alts: list[str]) -> None:
    """The HTML export keeps every figure's alternative text, and every
    progress bar in it reads complete (a saved bar showing "0/27" would say
    the runs never happened)."""
    kept = set(image_alts(exported))
    missing = [alt for alt in alts if alt not in kept]
    assert not missing, f"the HTML export lost the alt text of {len(missing)} figure(s)"
    unfinished = [f"{done}/{total}" for done, total in PROGRESS_COUNT.findall(exported)
                  if done != total]
    assert not unfinished, f"progress saved before it finished: {unfinished}"

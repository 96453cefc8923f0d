"""Executing a notebook of ``notebooks/`` the way papermill runs it for users:
the text notebook (jupytext percent format) is read, its ``parameters`` cell
overridden, and every cell run in a fresh ``python3`` kernel from the lab's
root. A cell that raises fails the test with the cell's traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jupytext
import nbformat
import papermill

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def execute_notebook(name: str, parameters: dict[str, Any], out_dir: Path,
                     timeout_s: int = 300) -> nbformat.NotebookNode:
    """Run ``notebooks/NAME.py`` with ``parameters``; return the executed notebook
    (also written to ``out_dir/NAME.ipynb`` for inspection)."""
    notebook = jupytext.read(NOTEBOOKS / f"{name}.py")
    tagged = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{name}: expected one cell tagged 'parameters', found {len(tagged)}"
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / f"{name}.ipynb"
    return papermill.execute_notebook(
        notebook, str(output), parameters=parameters, kernel_name="python3", language="python",
        cwd=str(NOTEBOOKS.parent), progress_bar=False, execution_timeout=timeout_s)


def outputs_of(notebook: nbformat.NotebookNode, kind: str) -> list[Any]:
    """Every output of type ``kind`` (``display_data``, ``stream``...) in the notebook."""
    return [output for cell in notebook.cells if cell.cell_type == "code"
            for output in cell.get("outputs", []) if output.get("output_type") == kind]


def figures_of(notebook: nbformat.NotebookNode) -> list[Any]:
    """The PNG figures the notebook displayed, after checking no cell errored."""
    assert not outputs_of(notebook, "error"), outputs_of(notebook, "error")
    return [output for output in outputs_of(notebook, "display_data")
            if "image/png" in output.get("data", {})]


def printed_by(notebook: nbformat.NotebookNode) -> str:
    """Everything the notebook's cells printed."""
    return "".join(output.get("text", "") for output in outputs_of(notebook, "stream"))

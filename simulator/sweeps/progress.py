"""Progress bars for many runs, on a terminal and in a notebook.

On a terminal, tqdm's text bar on stderr. In a notebook, the same text as
one output that is updated in place (a display with an id), so that the
notebook saves the bar in its last state, whoever runs it (JupyterLab,
papermill, ``nbconvert --execute``): a progress widget is saved as first
drawn ("0/27 0%"), and a text bar written to stderr is saved as every state
it went through, which an HTML export prints one after the other.
"""

from __future__ import annotations

import io
import sys
from typing import Any

from tqdm import tqdm


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython's kernel app)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "IPKernelApp" in shell.config


class NotebookTextBar(tqdm):
    """tqdm's text bar, drawn as one notebook output replaced at each refresh."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._handle: Any = None
        # tqdm still writes line ends and clears to its file: keep them out of the notebook.
        kwargs["file"] = io.StringIO()
        kwargs.setdefault("ascii", False)  # the file says nothing of unicode; Jupyter shows it
        super().__init__(*args, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        from IPython.display import display

        bundle = {"text/plain": self.__str__() if msg is None else msg}
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)
        return True


def progress_bar(**options: Any) -> tqdm:
    """A tqdm bar with ``options`` (``total``, ``desc``, ``unit``,
    ``disable``...): the notebook's in-place text bar in a Jupyter kernel,
    tqdm's own elsewhere."""
    return NotebookTextBar(**options) if in_notebook() else tqdm(**options)

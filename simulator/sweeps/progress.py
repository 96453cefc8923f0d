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
import time
from collections.abc import Callable, Sequence
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


class ItemProgress:
    """A long job's progress, item by item (a campaign's mutants, a
    rediscovery's variants): on a terminal or in a notebook, one updating
    line (items done of the total, how many were found so far, what is being
    judged now, the time taken and an estimate of what remains) with each
    item's own line printed above it; elsewhere (a CI log, a pipe) a plain
    line per item carrying the same figures, never a bar's redraws."""

    def __init__(self, total: int, what: str, done: int = 0, found: int = 0,
                 echo: Callable[[str], None] = print, live: bool | None = None,
                 unit: str = "item") -> None:
        self.total, self.done, self.found = total, done, found
        self.echo = echo
        self.started = time.monotonic()
        self.judged_here = 0  # items judged by this process: what the estimate rests on
        self.live = (sys.stderr.isatty() or in_notebook()) if live is None else live
        self.bar = progress_bar(total=total, initial=done, desc=what, unit=unit,
                                dynamic_ncols=True) if self.live else None

    def judging(self, names: Sequence[str]) -> None:
        """Say what is being judged now."""
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.found} found; now {', '.join(names)}")

    def item(self, line: str, found: bool) -> None:
        """One more item judged (``found``: it counts among the found), and its line."""
        self.done += 1
        self.judged_here += 1
        self.found += found
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
            self.bar.set_postfix_str(f"{self.found} found", refresh=False)
            self.bar.update(1)
            return
        self.echo(f"[{self.done}/{self.total}, {self.found} found, {self.timing()}] {line}")

    def timing(self) -> str:
        """``12m03s, about 40m left``: elapsed here, and the rest at this pace."""
        elapsed = time.monotonic() - self.started
        left = self.total - self.done
        estimate = ("" if not left else
                    f", about {_clock(elapsed / self.judged_here * left)} left")
        return f"{_clock(elapsed)}{estimate}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _clock(seconds: float) -> str:
    """``1h02m``, ``12m03s`` or ``42s``."""
    whole = round(seconds)
    hours, minutes, secs = whole // 3600, whole // 60 % 60, whole % 60
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"

"""The lab's commands as a user can paste them back: the Python that runs the
lab now (its virtual environment's, named as a path from the working
directory when it lies below it), never a bare ``python`` that may not have
the lab installed."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def python_here() -> str:
    """The interpreter running the lab, as short a path as still works from here."""
    executable = Path(sys.executable)
    try:
        relative = executable.relative_to(Path.cwd())
    except ValueError:
        return str(executable)
    return str(relative) if relative.parent != Path(".") else f".{os.sep}{relative}"


def lab_command(*words: str) -> str:
    """``python -m simulator WORDS...`` with the Python that runs the lab, quoted for a shell."""
    return shlex.join([python_here(), "-m", "simulator", *map(str, words)])

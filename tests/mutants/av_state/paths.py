"""Where a Lua mutant's script is: beside its module."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def beside(name: str) -> Path:
    return HERE / f"{name}.lua"

"""A committed sweep file as a notebook's parameters adjust it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator import lab_path
from simulator.sweeps.design import Sweep, load_sweep


def adjusted_sweep(sweep_file: str | Path, parameters: Mapping[str, str], caller: str,
                   seeds: int | list[int] | None = None,
                   set_fields: Mapping[str, Any] | None = None,
                   values: Mapping[str, Sequence[Any] | None] | None = None) -> Sweep:
    """The sweep file, with ``seeds``, other scenario fields set at every point
    (``set_fields``, dotted paths), and each of ``values`` (a notebook
    parameter's name, as ``parameters`` maps it to the field it varies)
    varied instead of the file's when given. A name ``parameters`` lacks is a
    ``TypeError`` naming ``caller``. A relative ``sweep_file`` is inside the
    lab's checkout."""
    values = dict(values or {})
    unknown = sorted(set(values) - set(parameters))
    if unknown:
        raise TypeError(f"{caller}: unknown parameter(s) {', '.join(unknown)}; "
                        f"expected {', '.join(parameters)}")
    path = Path(sweep_file)
    if not path.is_absolute():
        path = lab_path(str(path))
    vary = {parameters[name]: list(chosen) for name, chosen in values.items()
            if chosen is not None}
    return load_sweep(path, seeds=seeds, set_fields=dict(set_fields or {}) or None,
                      vary=vary or None)

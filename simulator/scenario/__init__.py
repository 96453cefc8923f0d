"""What a scenario may say: the pydantic models, their domains, the
distributions, the fault and workload vocabulary, and the condition language.

``model`` (the ``Scenario`` and reading a scenario file), ``base`` (the base
of every model), ``domains`` and ``reference`` (a field's domain in words;
the fields reference), ``distributions`` and ``empirical``, ``arrivals``,
``workload``, ``sessions``, ``faults``, ``limits``, ``conditions`` (thresholds,
``[expect]``, invariants). It builds only on ``engine``.

``simulator.scenario.Scenario``, ``load_scenario``, ``parse_scenario``... are
the model module's names, re-exported here as they always were importable.
"""

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    # Lazily: importing one submodule (say ``distributions``) must not import them all.
    if name.startswith("__"):
        raise AttributeError(name)
    module = importlib.import_module("simulator.scenario.model")
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module 'simulator.scenario' has no attribute {name!r}") from None

"""Probing a mutant of a store's Python: the scenario's fault-free run, beside
the unmutated kind's.

A Lua mutant is probed on the script calls the fault-free run sent
(``simulator.mutate.probe``); a Python one changes what the store does between
them, so it is probed on the run itself: the mutant kind, with a marker just
before the mutated statement, runs the scenario without faults, and the run's
trace fingerprint is set beside the unmutated kind's. What it finds:

* ``stillborn`` -- the mutant class does not compile or cannot be built;
* ``not run`` -- the marker never ran: the run never reached the change;
* ``equivalent`` -- it ran, and the run's trace is the same to the last row;
* ``differs`` -- the trace differs (or the store raised): worth judging;
* ``hangs`` -- the run never gave the simulation back (``simulator.run.hang``):
  detected without a hunt, the store's liveness broken;
* ``raises`` -- the store raised out of the run itself (opening the ledger,
  say), where no call's guard files it as the store's: detected without a hunt.

The marker only counts, so the marked run is the mutant's own run.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from simulator.mutate.probe import Probed
from simulator.mutate.python import PythonMutation, mutant_class
from simulator.run.hang import Hung, bounded
from simulator.scenario.conditions import STORE_RAISED
from stores import registry
from stores.registry import StoreKind

PROBED = ".probe"
"""What a marked mutant kind's name has after the mutant's (and a number)."""
PROBES = itertools.count(1)
"""Numbers the marked kinds this process registers."""
FINGERPRINT = "trace_fingerprint"
HUNG = "hangs"
"""The probe's outcome for a mutant whose run never gave the simulation back."""
RAISES = "raises"
"""The probe's outcome for a mutant whose store raised out of the run itself
(where no call guards it: building the ledger, opening the service)."""
UNRUNNABLE = (HUNG, RAISES)
"""Outcomes detected by the probe alone: no hunt can run such a mutant."""
HANG_FLOOR_S = 10.0
HANG_FACTOR = 20
"""A mutant's fault-free run counts as hung past this many times the base
kind's (and at least ``HANG_FLOOR_S`` seconds): far beyond any slowdown one
change can cause by doing more work, yet a bounded wait."""


class PythonProber:
    """Probes Python mutants of ``base`` on ``scenario``'s fault-free run."""

    def __init__(self, base: StoreKind, scenario: Any) -> None:
        from simulator.run.compose import run_scenario

        self.base, self.scenario = base, scenario
        started = time.perf_counter()
        self.summary = run_scenario(scenario).summary
        self.bound_s = max(HANG_FLOOR_S, HANG_FACTOR * (time.perf_counter() - started))
        """How long a mutant's run may take before it counts as hung."""

    def probe(self, name: str, original: type, mutation: PythonMutation) -> Probed:
        """Probe ``mutation`` of ``original``, the mutant kind being ``name``."""
        from simulator.run.compose import run_scenario

        times = [0]

        def reached() -> None:
            times[0] += 1

        try:
            marked = mutant_class(original, mutation, reached)
        except Exception as error:  # noqa: BLE001 -- any failure to build it is the finding
            return Probed("stillborn", f"{type(error).__name__}: {error}")
        assert self.base.with_classes is not None
        # A kind of its own each time: the marked class counts into this
        # probe's ``times``, and a second campaign in one process (a notebook,
        # a test) must not run the first one's marker.
        probe_name = f"{name}{PROBED}.{next(PROBES)}"
        registry.register(self.base.with_classes(probe_name, {original: marked}))
        try:
            with bounded(self.bound_s):
                summary = run_scenario(self.scenario.model_copy(update={"store": probe_name})
                                       ).summary
        except Hung as hung:
            return Probed(HUNG, f"line {mutation.line} ran {times[0]} time(s); the run made "
                                f"{hung}")
        except Exception as error:  # noqa: BLE001 -- only the mutant changed: the store broke
            return Probed(RAISES, f"line {mutation.line} ran {times[0]} time(s); the run "
                                  f"stopped on {type(error).__name__}: {error}")
        if not times[0]:
            return Probed("not run", f"{mutation.script.rsplit('.', 1)[-1]}."
                                     f"{mutation.method} line {mutation.line} never ran")
        if summary.get(STORE_RAISED):
            return Probed("differs", f"the store raised {summary[STORE_RAISED]}")
        if summary.get(FINGERPRINT) != self.summary.get(FINGERPRINT):
            return Probed("differs", f"line {mutation.line} ran {times[0]} time(s); the trace "
                                     f"differs from the base's")
        return Probed("equivalent", f"line {mutation.line} ran {times[0]} time(s); the same "
                                    f"trace as the base's")

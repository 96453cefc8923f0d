"""The engine: the discrete-event kernel and what every layer above steps on.

``kernel`` (virtual microseconds, a heap with a sequence tie-break, coroutine
processes), ``traps`` (what a process may ask of the kernel), ``runtime``
(the runtime port the stores see: clock, sleep, timeout, spawn, ids),
``streams`` (seeded random streams, one per purpose), ``trace`` (the event
trace and its fingerprint), ``collector`` (keeping the garbage collector to
what a run creates). It imports nothing of the lab.
"""

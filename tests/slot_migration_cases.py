"""What a cluster's nodes answer while one slot moves (Redis 7.0), as a table
both the simulated cluster (``tests/simulator/test_slot_migration.py``) and a
real one (``test_slot_migration_real.py``) are held to.

The slot is ``{x}``'s. Key ``a`` is on the slot's old node when the
migration opens; ``b`` is nowhere. Each stage lists, for a command sent to
the ``old`` node, the ``new`` one or a ``third``, with its keys and whether
``ASKING`` went first, what the node answers: ``served`` or a redirect's code
(``ASK``/``MOVED`` name the node to go to)."""

from __future__ import annotations

SLOT_KEY = "{x}"
A, B = "lab:{x}:a", "lab:{x}:b"
MISSING_IN_SCRIPT = "non local key"
"""What a script's command on a key of the slot no longer there fails with, on the old node."""

OPENED = [
    ("old", (A,), False, "served"),
    ("old", (A, B), False, "TRYAGAIN"),
    ("old", (B,), False, "ASK new"),
    ("new", (B,), False, "MOVED old"),
    ("new", (A, B), True, "TRYAGAIN"),
    ("new", (B,), True, "served"),
    ("third", (A,), False, "MOVED old"),
]
"""The slot opened on both nodes; ``a`` still on the old one."""

A_MOVED = [
    ("old", (A,), False, "ASK new"),
    ("old", (A, B), False, "ASK new"),
    ("new", (A,), True, "served"),
    ("new", (A, B), True, "TRYAGAIN"),
    ("new", (A,), False, "MOVED old"),
]
"""``a`` handed over to the new node; the slot still the old node's."""

FINISHED = [
    ("old", (A,), False, "MOVED new"),
    ("third", (A,), False, "MOVED new"),
    ("new", (A,), False, "served"),
    ("new", (A, B), False, "served"),
]
"""The slot given to the new node on every primary."""

"""Where ``simulator.strategies`` always was: now ``simulator.search.strategies``.

Kept so property tests written against the old name keep working.
"""

from simulator.search.strategies import *  # noqa: F403

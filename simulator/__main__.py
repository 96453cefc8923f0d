"""``python -m simulator``: see ``simulator.cli``."""

import faulthandler
import sys

from simulator.cli import main

# Should the process ever die on a signal of its own (a crash in a compiled
# extension: SIGSEGV, SIGBUS...), the Python stack of every thread goes to
# stderr first, so the report names where rather than only "-11".
faulthandler.enable()
sys.exit(main())

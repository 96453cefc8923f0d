# The compiled hot path, when a current build exists (simulator.compiled says
# when it is used); this must run before any other module of the package loads.
from simulator.compiled import install as _install_compiled_hot_path

_install_compiled_hot_path()

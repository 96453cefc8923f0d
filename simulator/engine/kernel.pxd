# Cython declarations for simulator/engine/kernel.py, read only by the compiled build
# (simulator.compiled): the interpreter never sees this file. Owner, Process
# and Kernel become extension types, so the run loop reads their fields as
# struct members instead of looking them up, and types the loop's locals.
# Every field stays a Python object (no C integers): the compiled kernel
# computes exactly what the interpreted one does. Keep the field lists in
# step with the classes' __slots__: a field missing here is an AttributeError
# in the compiled build only (the suite runs compiled when the build is current).
import cython

cdef class Owner:
    cdef public object name, alive, paused_until, processes

cdef class Process:
    cdef public object coro, owner, name, tag, token, finished, result, error, joiners

cdef class Kernel:
    cdef public object seed, now, swallowed_io, current
    cdef public object _heap, _sequence, _discarded, _graveyard, _owners, _guard, _until_guard
    cdef public object failures

    @cython.locals(process=Process, owner=Owner, heap=list)
    cpdef _run_events(self, until_us, most)

# Cython declarations for simulator/engine/kernel.py, read only by the compiled build
# (simulator.compiled): the interpreter never sees this file. Owner, Process
# and Kernel become extension types, so the run loop reads their fields as
# struct members instead of looking them up, and types the loop's locals.
# Every field of theirs stays a Python object (no C integers), so the compiled
# kernel computes exactly what the interpreted one does; the one exception is
# KeyedHeap's keys, integers below 2**63 that only order events (the
# interpreted build's TupleHeap orders them the same: test_event_heap.py).
# Keep the field lists in
# step with the classes' __slots__: a field missing here is an AttributeError
# in the compiled build only (the suite runs compiled when the build is current).
import cython

from simulator.engine.traps cimport Send, Sleep

cdef class Owner:
    cdef public object name, alive, paused_until, processes

cdef class Process:
    cdef public object coro, owner, name, tag, token, finished, result, error, joiners

cdef class KeyedHeap:
    # The keys as C integers (an event's time and sequence number fit 64 bits:
    # 292,000 years of microseconds), so sifting compares integers, not tuples.
    cdef long long[::1] _times
    cdef long long[::1] _sequences
    cdef long long[::1] _slots
    cdef long long[::1] _free
    cdef list _events
    cdef Py_ssize_t _size, _free_count

    @cython.locals(time_us=cython.longlong, sequence=cython.longlong, slot=Py_ssize_t,
                   position=Py_ssize_t)
    cpdef push(self, tuple event)

    @cython.locals(parent_time=cython.longlong, parent=Py_ssize_t)
    cdef inline void _rise(self, Py_ssize_t position, long long time_us, long long sequence,
                           long long slot)

    cdef inline bint _before(self, Py_ssize_t one, Py_ssize_t other)

    cpdef bint due(self, long long until_us)

    @cython.locals(last_time=cython.longlong, last_sequence=cython.longlong,
                   slot=Py_ssize_t, last_slot=cython.longlong, size=Py_ssize_t,
                   position=Py_ssize_t, child=Py_ssize_t, right=Py_ssize_t)
    cpdef tuple pop(self)

cdef class Kernel:
    cdef public object seed, now, swallowed_io, current
    cdef public KeyedHeap _heap
    cdef public object _sequence, _discarded, _graveyard, _owners, _guard, _until_guard
    cdef public object failures

    @cython.locals(process=Process, owner=Owner, heap=KeyedHeap, sleep=Sleep, send=Send)
    cpdef _run_events(self, long long until_us, most)

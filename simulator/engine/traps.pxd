# Cython declarations for simulator/engine/traps.py, read only by the compiled
# build (simulator.compiled): the traps become extension types, so the kernel
# (which cimports them) reads a trap's fields as struct members. Every field
# stays a Python object; keep the lists in step with the classes' __slots__.

cdef class Trap:
    pass

cdef class Sleep(Trap):
    cdef public object delay_us

cdef class Send(Trap):
    cdef public object link, command

cdef class Join(Trap):
    cdef public object process, timeout_us

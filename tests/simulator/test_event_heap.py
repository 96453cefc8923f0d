"""The kernel's two event queues give one order: ``KeyedHeap`` (what the
compiled build runs, its keys in machine integers and its heap an array of
slots) pops exactly what ``TupleHeap`` (``heapq``, the interpreted build's)
pops, whatever is pushed and popped, across its arrays' growth.
Both classes run in either build, so this checks the one the suite runs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.kernel import (
    COMPILED,
    INITIAL_CAPACITY,
    Kernel,
    KeyedHeap,
    TupleHeap,
    event_heap,
)

# An operation: push an event at a time offset, or pop one.
operations = st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(0, 50)),
    st.tuples(st.just("pop"), st.just(0)),
), max_size=400)


def _replay(heap, steps, pushes_first: int = 0) -> list:
    popped = []
    sequence = 0
    now = 0
    for _ in range(pushes_first):
        sequence += 1
        heap.push((sequence % 97, sequence, "callback", (sequence,)))
    for operation, offset in steps:
        if operation == "push":
            sequence += 1
            heap.push((now + offset, sequence, "callback", (sequence,)))
        elif operation == "pop" and len(heap):
            event = heap.pop()
            now = event[0]
            popped.append(event)
    while heap.due(1 << 40):
        popped.append(heap.pop())
    assert len(heap) == 0
    return popped


@settings(max_examples=200, deadline=None)
@given(operations)
def test_keyed_and_tuple_heaps_pop_the_same_events_in_the_same_order(steps):
    assert _replay(KeyedHeap(), steps) == _replay(TupleHeap(), steps)


@settings(max_examples=10, deadline=None)
@given(operations)
def test_the_same_past_the_arrays_first_capacity(steps):
    many = 3 * INITIAL_CAPACITY
    keyed = _replay(KeyedHeap(), steps, pushes_first=many)
    assert keyed == _replay(TupleHeap(), steps, pushes_first=many)
    assert len(keyed) >= many
    # Soonest first, same-time events in the order they were scheduled.
    assert [event[:2] for event in keyed[:many]] == sorted(event[:2] for event in keyed[:many])


def test_due_says_whether_the_first_event_is_at_or_before_the_instant():
    for heap in (KeyedHeap(), TupleHeap()):
        assert not heap.due(10)
        heap.push((5, 1, "callback", ()))
        assert heap.due(5) and heap.due(6) and not heap.due(4)


def test_a_cleared_heap_holds_nothing_and_takes_new_events():
    """What ``Kernel.close`` does to the queue: every event to come is dropped."""
    for heap in (KeyedHeap(), TupleHeap()):
        for sequence in range(1, 4):
            heap.push((sequence, sequence, "callback", ()))
        heap.clear()
        assert len(heap) == 0 and not heap.due(1 << 40)
        heap.push((7, 4, "callback", ()))
        assert heap.pop() == (7, 4, "callback", ())


def test_the_compiled_build_runs_the_keyed_heap():
    assert isinstance(Kernel(1)._heap, KeyedHeap if COMPILED else TupleHeap)
    assert isinstance(event_heap(), KeyedHeap if COMPILED else TupleHeap)

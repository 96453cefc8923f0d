"""The search for bad schedules: hunts, their batches and strategies, race
reports, the story a report tells, and the counterfactual mode.

``hunt`` (draw, judge and shrink fault schedules), ``batches`` (hunts on
several processes or a Dask cluster), ``strategies`` (the Hypothesis
strategies, importable for your own property tests), ``races`` (replaying a
race report), ``story`` (where to look in a run), ``counterfactual``.
"""

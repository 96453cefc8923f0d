"""The oracle: what really happened, measured against what the store recorded.

``budget`` holds the budget family's truth and metrics; ``observer`` feeds it
the store's record; ``attribution`` and ``leaks`` are its arithmetic.
"""

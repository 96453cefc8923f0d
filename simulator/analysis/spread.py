"""The spread over seeds: one point of a sweep, run with several seeds, as a
median and a band (by default the 10th to 90th percentile)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd
from matplotlib.axes import Axes


def seed_bands(frame: pd.DataFrame, x: str, y: str, by: Sequence[str] = (),
               low: float = 0.1, high: float = 0.9) -> pd.DataFrame:
    """Per value of ``x`` (and of each column in ``by``): the median of ``y``
    over seeds, its ``low`` and ``high`` quantiles, and how many runs."""
    if not 0 <= low <= high <= 1:
        raise ValueError(f"expected 0 <= low <= high <= 1, got low={low}, high={high}")
    missing = [column for column in (x, y, *by) if column not in frame.columns]
    if missing:
        raise KeyError(f"no column {', '.join(map(repr, missing))} in these results; "
                       f"columns: {', '.join(frame.columns)}")
    grouped = frame.groupby([*by, x], sort=True)[y]
    bands = pd.DataFrame({
        "median": grouped.median(),
        "low": grouped.quantile(low),
        "high": grouped.quantile(high),
        "runs": grouped.count(),
    })
    return bands.reset_index()


def line_styles() -> Iterator[dict[str, Any]]:
    """Solid, dashed, dotted, dash-dotted in turn, each thinner: series that
    coincide on a panel (two limits leaking alike) stay in sight, the widest
    under the narrower."""
    return itertools.cycle([{"linestyle": "-", "linewidth": 2.6},
                            {"linestyle": "--", "linewidth": 2.0},
                            {"linestyle": ":", "linewidth": 1.8},
                            {"linestyle": "-.", "linewidth": 1.6}])


def plot_band(ax: Axes, bands: pd.DataFrame, x: str, label: str, color: str | None = None,
              alpha: float = 0.2, marker: str = "o", **style: Any) -> None:
    """Draw ``seed_bands`` output: the median as a line with markers (``marker=""``:
    none, for a dense time series), the band shaded; ``style``: the line's
    (``line_styles``)."""
    line, = ax.plot(bands[x], bands["median"], marker=marker, label=label, color=color,
                    **style)
    ax.fill_between(bands[x], bands["low"], bands["high"], color=line.get_color(),
                    alpha=alpha, linewidth=0)

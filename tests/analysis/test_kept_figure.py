"""A notebook's figure is kept as a PNG beside its runs and displayed with
alternative text saying what it plots."""

from __future__ import annotations

import base64
from pathlib import Path

from matplotlib.figure import Figure

from simulator.analysis import figure_description, figures_dir, kept_figure


def two_panels() -> Figure:
    figure = Figure()
    left, right = figure.subplots(1, 2)
    left.set_title("Too short")
    left.set_xlabel("TTL (s)")
    left.set_ylabel("overshoot\n(% of cap)")
    right.set_xlabel("TTL (s)")
    figure.suptitle('The "trade-off"')
    return figure


def test_a_figure_is_described_by_its_own_titles_and_axes():
    assert figure_description(two_panels()) == (
        'Titled "The "trade-off"". Panels: "Too short" (x: TTL (s); y: overshoot\n(% of cap)), '
        "untitled (x: TTL (s)).")


def test_a_kept_figure_is_written_as_the_png_it_displays_with_its_alt_text(tmp_path: Path):
    figures = figures_dir(tmp_path / "results")
    kept = kept_figure(two_panels(), figures, "trade-off", "Both costs against the TTL.")
    assert kept.path == tmp_path / "results" / "figures" / "trade-off.png"
    assert kept.path.read_bytes() == kept.png
    # One line, the sentence first, then what the figure's titles say.
    assert kept.alt == ('Both costs against the TTL. Titled "The "trade-off"". Panels: '
                        '"Too short" (x: TTL (s); y: overshoot (% of cap)), untitled (x: TTL (s)).')
    data, metadata = kept._repr_mimebundle_()
    assert base64.b64decode(data["image/png"]) == kept.png
    assert data["text/plain"] == kept.alt
    assert metadata["image/png"]["alt"] == kept.alt
    # The HTML image carries the text, quotes escaped, and the same PNG.
    assert 'alt="Both costs against the TTL. Titled &quot;The &quot;trade-off&quot;&quot;.' in (
        data["text/html"])
    assert f'src="data:image/png;base64,{data["image/png"]}"' in data["text/html"]

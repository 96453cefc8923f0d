"""How results are shown: the console report, verdicts, JUnit XML, diffs,
timelines (matplotlib and Plotly) and the HTML report. Reads results only.

``report`` (the summary table and the fields reference), ``verdicts``,
``junit``, ``diff``, ``marks`` (what a timeline draws), ``timeline``
(``draw_timeline``), ``plotly_timeline``, ``html_report``.
"""

"""``run --junit FILE``: a run's verdicts and expectations as JUnit XML.

A CI system that reads JUnit XML (GitLab, Jenkins, GitHub's test reporters)
then shows each invariant and each ``[expect]`` entry as a test: one test
suite per run, one test case per invariant verdict (class ``invariants``) and
per expectation (class ``expect``), a ``<failure>`` carrying the measured
figure where an invariant broke or an expectation failed. A run that could
not judge the store adds a test case ``run.exercised`` in ``<error>`` with
the reason, and an invariant at 0 there is ``<skipped>``. The verdicts are
the ones ``run`` prints (``simulator.present.verdicts``); nothing is judged here.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from simulator.present.verdicts import InvariantVerdict, expectation_line
from simulator.scenario.conditions import ExpectationOutcome


def junit_xml(suite: str, verdicts: Sequence[InvariantVerdict],
              expectations: Sequence[ExpectationOutcome],
              inconclusive: str | None = None) -> str:
    """The XML document: ``<testsuites>`` holding the one ``<testsuite>`` named
    ``suite``; ``inconclusive``: why the run could not judge the store, if so."""
    # (class, test name, the line run prints, how it ended)
    cases = [("run", "exercised", f"INCONCLUSIVE {inconclusive}", "error")] if inconclusive else []
    cases += [("invariants", verdict.metric, str(verdict),
               "failure" if not verdict.held else "skipped" if inconclusive else "")
              for verdict in verdicts]
    cases += [("expect", outcome.label, expectation_line(outcome),
               "" if outcome.held else "failure") for outcome in expectations]
    ended = [case[3] for case in cases]
    counts = {"tests": str(len(cases)), "failures": str(ended.count("failure")),
              "errors": str(ended.count("error")), "skipped": str(ended.count("skipped"))}
    root = ET.Element("testsuites", {"name": suite, **counts})
    testsuite = ET.SubElement(root, "testsuite", {"name": suite, **counts})
    for group, name, line, how in cases:
        case = ET.SubElement(testsuite, "testcase", {"classname": f"{suite}.{group}",
                                                     "name": name})
        if how == "failure":
            kind = "broken" if group == "invariants" else "failed"
            ET.SubElement(case, "failure", {"message": line, "type": kind}).text = line
        elif how == "error":
            ET.SubElement(case, "error", {"message": line, "type": "inconclusive"}).text = line
        elif how == "skipped":
            ET.SubElement(case, "skipped", {"message": f"inconclusive: {inconclusive}"})
        else:
            # What was measured where it passed too, for whoever reads the report.
            ET.SubElement(case, "system-out").text = line
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: Path, suite: str, verdicts: Sequence[InvariantVerdict],
                expectations: Sequence[ExpectationOutcome],
                inconclusive: str | None = None) -> None:
    """Write ``junit_xml`` to ``path``, making its directory if need be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(suite, verdicts, expectations, inconclusive), encoding="utf-8")

"""``run --junit FILE``: a run's verdicts and expectations as JUnit XML.

A CI system that reads JUnit XML (GitLab, Jenkins, GitHub's test reporters)
then shows each invariant and each ``[expect]`` entry as a test: one test
suite per run, one test case per invariant verdict (class ``invariants``) and
per expectation (class ``expect``), a ``<failure>`` carrying the measured
figure where an invariant broke or an expectation failed. The verdicts are
the ones ``run`` prints (``simulator.present.verdicts``); nothing is judged here.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from simulator.present.verdicts import InvariantVerdict, expectation_line
from simulator.scenario.conditions import ExpectationOutcome


def junit_xml(suite: str, verdicts: Sequence[InvariantVerdict],
              expectations: Sequence[ExpectationOutcome]) -> str:
    """The XML document: ``<testsuites>`` holding the one ``<testsuite>`` named ``suite``."""
    # (class, test name, the line run prints, broken or failed)
    cases = [("invariants", verdict.metric, str(verdict), not verdict.held)
             for verdict in verdicts]
    cases += [("expect", outcome.label, expectation_line(outcome), not outcome.held)
              for outcome in expectations]
    counts = {"tests": str(len(cases)), "failures": str(sum(case[3] for case in cases)),
              "errors": "0", "skipped": "0"}
    root = ET.Element("testsuites", {"name": suite, **counts})
    testsuite = ET.SubElement(root, "testsuite", {"name": suite, **counts})
    for group, name, line, failed in cases:
        case = ET.SubElement(testsuite, "testcase", {"classname": f"{suite}.{group}",
                                                     "name": name})
        if failed:
            kind = "broken" if group == "invariants" else "failed"
            ET.SubElement(case, "failure", {"message": line, "type": kind}).text = line
        else:
            # What was measured where it passed too, for whoever reads the report.
            ET.SubElement(case, "system-out").text = line
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: Path, suite: str, verdicts: Sequence[InvariantVerdict],
                expectations: Sequence[ExpectationOutcome]) -> None:
    """Write ``junit_xml`` to ``path``, making its directory if need be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(suite, verdicts, expectations), encoding="utf-8")

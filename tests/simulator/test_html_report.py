"""The HTML report opens in a real browser: headless Chromium, driven over
the DevTools protocol, loads it from a file:// URL and shows the verdicts and
the timeline with no console error and no request to the network.

Chromium comes from the distribution's packages (``apt-get install
chromium``; ``.ci/run`` installs it). Without it the browser tests skip
loudly, and fail instead when ``REQUIRE_BROWSER=1`` (CI sets it). A
screenshot of the page goes to ``data/results/report-screenshot.png``.
"""

from __future__ import annotations

import base64
import html
import itertools
import json
import os
import re
import shutil
import subprocess
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from simulator.cli import main
from simulator.present.html_report import scenario_text
from simulator.scenario.model import load_scenario, parse_scenario
from simulator.search.race_report import RaceReport

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "data" / "races" / "split-settlement-lost-release-reply.toml"
SCREENSHOT = REPO / "data" / "results" / "report-screenshot.png"
BROWSER_SKIP_REASON = "no Chromium: browser tests skipped (apt-get install chromium)"


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class HeadlessChromium:
    """One headless Chromium and one page, spoken to over the DevTools protocol."""

    def __init__(self, binary: str, profile: Path) -> None:
        import websocket  # the test extra's; imported only where a browser runs

        self.process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = self._port(profile / "DevToolsActivePort")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(target for target in json.load(answer) if target["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30,
                                                  suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def _port(self, active_port: Path, timeout_s: float = 30) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if active_port.exists() and active_port.read_text().strip():
                return int(active_port.read_text().split()[0])
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}")
            time.sleep(0.1)
        raise RuntimeError("chromium did not open its DevTools port")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command; keep the events that arrive meanwhile; return its result."""
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def wait_for(self, method: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(event.get("method") == method for event in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(method)
            self.events.append(json.loads(self.socket.recv()))

    def evaluate(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return answer["result"].get("value")

    def close(self) -> None:
        self.socket.close()
        self.process.terminate()
        self.process.wait(timeout=10)


def console_errors(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and error log entries, in words."""
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            found.append(" ".join(str(arg.get("value", arg.get("description")))
                                  for arg in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            found.append(details.get("exception", {}).get("description", details["text"]))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            found.append(params["entry"]["text"])
    return found


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    """The split-settlement race's report, as ``replay --report`` writes it:
    the variant beside the fixed store."""
    page = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["replay", str(REPORT), "--report", str(page)]) == 0
    return page


@pytest.fixture(scope="module")
def chromium() -> str:
    """Chromium's path, or a loud skip (a failure when REQUIRE_BROWSER=1)."""
    binary = chromium_binary()
    if binary is None:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {BROWSER_SKIP_REASON}")
        pytest.skip(BROWSER_SKIP_REASON)
    return binary


@pytest.fixture(scope="module")
def rendered(chromium, report_html, tmp_path_factory) -> dict[str, Any]:
    """What Chromium showed of the report: the DOM's facts, the events, a screenshot."""
    browser = HeadlessChromium(chromium, tmp_path_factory.mktemp("chromium-profile"))
    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable")
        browser.call("Page.navigate", url=report_html.as_uri())
        browser.wait_for("Page.loadEventFired")
        deadline = time.monotonic() + 30
        while not browser.evaluate("document.querySelectorAll('.main-svg').length > 0"):
            assert time.monotonic() < deadline, "plotly drew nothing within 30 s"
            time.sleep(0.2)
        facts = {
            "verdicts": browser.evaluate(
                "document.getElementById('verdicts-run').innerText"),
            "fixed_verdicts": browser.evaluate(
                "document.getElementById('verdicts-fixed').innerText"),
            "timeline_svgs": browser.evaluate(
                "document.querySelectorAll('#timeline-run svg.main-svg').length"),
            "fixed_svgs": browser.evaluate(
                "document.querySelectorAll('#timeline-fixed svg.main-svg').length"),
            "lane_labels": browser.evaluate(
                "Array.from(document.querySelectorAll('#timeline-run .ytick text'))"
                ".map(t => t.textContent)"),
            "story": browser.evaluate("document.querySelector('#run pre').innerText"),
        }
        size = browser.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                            clip={"x": 0, "y": 0, "width": size["width"],
                                  "height": min(size["height"], 6000), "scale": 1})
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        SCREENSHOT.write_bytes(base64.b64decode(shot["data"]))
        browser.evaluate("0")  # let the last events in
        facts["events"] = list(browser.events)
        return facts
    finally:
        browser.close()


def test_the_report_renders_in_a_browser_with_no_console_error(rendered):
    assert console_errors(rendered["events"]) == []
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_report_shows_the_verdicts_of_the_run_and_of_the_fixed_store(rendered):
    assert "REPRODUCED: conservation_drift_microdollars_total = -12305" in rendered["verdicts"]
    # The store's own damage, named with the fault that exposed it (issue 24).
    assert re.search(r"BROKEN\s+conservation_drift_microdollars_total = -12,305 \(largest "
                     r"contributor: store_logic -12,305, exposed by reply_lost on ",
                     rendered["verdicts"])
    assert "HOLDS on the fixed store" in rendered["fixed_verdicts"]
    assert re.search(r"HELD\s+conservation_drift_microdollars_total = 0",
                     rendered["fixed_verdicts"])


def test_the_report_draws_both_timelines_with_every_lane_accounted_for(rendered):
    assert rendered["timeline_svgs"] > 0 and rendered["fixed_svgs"] > 0
    labels = rendered["lane_labels"]
    assert "faults" in labels and "replica 0" in labels
    assert "+2 more: 8, 9" in labels  # replicas 0-9 hit; 8 lanes drawn


def test_the_story_starts_at_the_fault_not_at_the_first_routine_event(rendered):
    assert "fault_lose_reply HDEL" in rendered["story"]
    assert "reply_lost HDEL" in rendered["story"]


def test_the_page_requests_nothing_but_itself(rendered):
    requested = [event["params"]["request"]["url"] for event in rendered["events"]
                 if event.get("method") == "Network.requestWillBeSent"]
    assert requested and all(url.startswith(("file:", "data:", "blob:")) for url in requested)


def test_the_report_file_loads_nothing_from_the_network(report_html):
    page = report_html.read_text()
    assert "Plotly.newPlot" in page  # the plotting library is inlined, not fetched
    # The library's own code names web sites (its logo's link, map tiles it
    # never fetches here): what the page itself loads is in its markup.
    markup = re.sub(r"(<script\b[^>]*>).*?</script>", r"\1</script>", page,
                    flags=re.DOTALL | re.IGNORECASE)
    assert re.findall(r"<script\b[^>]*\bsrc\b|<link\b|<iframe\b|<img\b", markup,
                      flags=re.IGNORECASE) == []
    assert re.findall(r"https?://", markup) == []


def test_run_writes_a_report_of_its_own_run(tmp_path, capsys):
    page = tmp_path / "tollgate.html"
    assert main(["run", str(REPO / "data" / "scenarios" / "tollgate.toml"), "--quiet",
                 "--out", str(tmp_path / "out"), "--report", str(page)]) == 0
    assert f"report: {page}" in capsys.readouterr().out
    text = page.read_text()
    assert "id='verdicts-run'" in text and 'id="timeline-run"' in text
    assert "Drawn from rates" in text and "tollgate.ledger" in text
    assert "id='verdicts-fixed'" not in text  # a run has no fixed store beside it


def test_a_directory_given_as_the_report_is_refused_before_anything_runs(tmp_path, capsys):
    assert main(["replay", str(REPORT), "--report", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --report:") and "is a directory" in line


def test_the_report_tells_the_race_report_s_story(report_html):
    story = RaceReport.load(REPORT).story.strip()
    first = story.split("\n\n")[0]
    assert html.escape(first, quote=True) in report_html.read_text()


def test_the_scenario_shown_reads_back_as_the_same_scenario(tmp_path):
    scenario = load_scenario(REPO / "data" / "scenarios" / "demo.toml",
                             {"faults.schedule": [{"at": "1s", "fault": "crash",
                                                   "replica": 3}]})
    text = scenario_text(scenario)
    assert 'duration = "20s"' in text and "_us" not in text
    assert parse_scenario(tomllib.loads(text)) == scenario

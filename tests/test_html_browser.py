"""The HTML report in a real headless Chromium (Debian's `chromium`, driven by Playwright; no
browser download): the file `report --html` writes for a seeded 7-date, 2-model history opens
from a file:// URL, fetches nothing, logs no console error, and its DOM — read back through the
browser — holds one trend line per model and bank, the planted regression under "since last
run", a failure row that opens to the test in full, and every test in a folded list that
opens the same way. A screenshot is written.

One browser and one page serve every check (the file's tests run in order on one worker). Where
no chromium is installed the checks skip, saying so; `.ci/run` installs it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Page, Request, sync_playwright

from eval_pipeline import cli
from eval_pipeline.core.inputs.validation import load_validated
from tests.conftest import TENANT
from tests.report_history import DATES, MODELS, REGRESSING_MODEL, planted_test, seed_history

# Debian's package; CHROMIUM names another binary (as for .ci/run).
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# Set to a path to keep a copy of the screenshot (docs/html-report.md names the command).
SCREENSHOT_TO = "EVAL_PIPELINE_SCREENSHOT_TO"

pytestmark = [
    pytest.mark.xdist_group("chromium"),
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"no {CHROMIUM}: the HTML report's browser check needs Debian's chromium package "
        "(apt-get install chromium; .ci/run installs it)",
    ),
]


class Opened:
    """The report as the browser opened it, and what the browser saw on the way."""

    def __init__(self, page: Page, report: Path, planted: str) -> None:
        self.page = page
        self.report = report
        self.planted = planted
        self.row = f'tr.test-row[data-test-id="{planted}"]'  # the planted regression's row
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        page.on("request", self._request)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"console {message.type}: {message.text}")

    def _request(self, request: Request) -> None:
        self.requests.append(request.url)


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Opened]:
    tmp = tmp_path_factory.mktemp("html")
    shutil.copytree(TENANT, tmp / "tenant")
    kb, banks = tmp / "tenant" / "kb.yaml", tmp / "tenant" / "banks"
    seed_history(kb, banks, tmp / "results")
    report = tmp / "report.html"
    assert cli.main(["report", "--html", str(report), "--results-dir", str(tmp / "results")]) == 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(20_000)
        seen = Opened(page, report, planted_test(load_validated(kb, banks)[1]))
        page.goto(report.as_uri(), wait_until="load")
        yield seen
        browser.close()


def test_it_opens_from_a_file_url_fetching_nothing_with_no_console_error(opened: Opened) -> None:
    assert opened.page.title().startswith("Retrieval evaluation — ")
    assert opened.requests == [opened.report.as_uri()]
    assert opened.errors == []


def test_its_dom_holds_one_drawn_trend_line_per_model_and_bank(opened: Opened) -> None:
    lines = opened.page.eval_on_selector_all(
        "#trends path[data-bank]",
        "els => els.map(e => [e.dataset.model, e.dataset.bank, e.getTotalLength()])",
    )
    banks = ["semantic", "state", "pattern", "always", "combined"]
    assert sorted((m, b) for m, b, _ in lines) == sorted((m, b) for m in MODELS for b in banks)
    assert all(length > 0 for _, _, length in lines)  # drawn, not empty
    marks = opened.page.eval_on_selector_all("#trends g.health-mark", "els => els.map(e => e.dataset.date)")
    assert marks == DATES * len(MODELS)


def test_since_last_run_names_the_planted_regression(opened: Opened) -> None:
    page = opened.page
    row = page.locator(f'#since [data-model="{REGRESSING_MODEL}"] {opened.row}')
    assert row.get_attribute("data-kind") == "regressed"
    other = next(m for m in MODELS if m != REGRESSING_MODEL)
    page.click(f'.tabs button[data-show-model="{other}"]')
    assert not row.is_visible()  # one model at a time
    page.click(f'.tabs button[data-show-model="{REGRESSING_MODEL}"]')
    assert row.is_visible() and opened.planted in row.inner_text()


def test_clicking_a_failure_row_shows_its_detail(opened: Opened) -> None:
    page = opened.page
    row = page.locator(f'#failures [data-model="{REGRESSING_MODEL}"] {opened.row}')
    detail = row.locator("xpath=following-sibling::tr[1]")
    assert not detail.is_visible()
    row.click()
    assert detail.is_visible() and row.get_attribute("aria-expanded") == "true"
    text = detail.inner_text()
    assert "Missing primary" in text and "Selections (final ranking)" in text and "Expected primary" in text
    row.click()
    assert not detail.is_visible()
    row.click()  # open again for the screenshot


def test_every_test_opens_from_the_full_list(opened: Opened) -> None:
    page = opened.page
    block = page.locator(f'#all-tests [data-model="{REGRESSING_MODEL}"]')
    passing = block.locator("tr.test-row.outcome-pass").first
    assert not passing.is_visible()  # the list is folded
    block.locator("summary").click()
    passing.click()
    detail = passing.locator("xpath=following-sibling::tr[1]")
    assert detail.is_visible() and "Score" in detail.inner_text()
    block.locator("summary").click()  # folded again for the screenshot


def test_a_screenshot_is_written(opened: Opened, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    opened.page.evaluate("window.scrollTo(0, 0)")  # the sticky model tabs back in their place
    opened.page.screenshot(path=str(shot), full_page=True)
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 50_000
    if target := os.environ.get(SCREENSHOT_TO):
        shutil.copy(shot, target)
    assert opened.errors == []

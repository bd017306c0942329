"""The HTML report as a file: self-contained, one trend line per model and bank, the planted
regression under "since last run", failures and topics worst first, errored tests as errored,
data escaped — on a seeded 7-date, 2-model history of both domains. (tests/test_html_browser.py
opens the same file in Chromium.)"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from upath import UPath

from eval_pipeline.core.diff.baseline import against_baseline
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.report.failures import failing_tests
from eval_pipeline.core.report.html import build_report, latest_comparison, render_html
from eval_pipeline.core.report.test_detail import details_by_test
from eval_pipeline.core.scoring.run_document import RESULTS_FILE, DocumentError, RunDocument
from eval_pipeline.providers.evaluation_index import read_history
from tests.conftest import REPO, TENANT
from tests.report_history import (
    DATES,
    ERROR,
    ERRORING_MODEL,
    MODELS,
    REGRESSING_MODEL,
    errored_test,
    planted_test,
    seed_history,
)
from tests.run_docs import always, doc, pattern, sem, state

# A URL of any scheme, or anything that would make the browser fetch: the file must open offline.
FETCHES = re.compile(r"[a-z][a-z0-9+.-]*://|\b(?:src|href|xmlns)\s*=|url\(|@import", re.IGNORECASE)


class Elements(HTMLParser):
    """Every start tag with its attributes and the id of the section it is in."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str], str]] = []
        self._section = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "section":
            self._section = values.get("id", "")
        self.found.append((tag, values, self._section))

    def query(self, tag: str, section: str | None = None, **attrs: str) -> list[dict[str, str]]:
        return [
            a
            for t, a, s in self.found
            if t == tag
            and (section is None or s == section)
            and all(a.get(k.rstrip("_").replace("_", "-")) == v for k, v in attrs.items())
        ]


def elements(html: str) -> Elements:
    parsed = Elements()
    parsed.feed(html)
    return parsed


Seeded = tuple[list[RunDocument], Banks]


@pytest.fixture(scope="module", params=["tenant", "sample"])
def seeded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    """Seeded once per domain for the module (14 evaluations each), on copies of the data."""
    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == "tenant":
        shutil.copytree(TENANT, tmp / "tenant")
        kb, banks = tmp / "tenant" / "kb.yaml", tmp / "tenant" / "banks"
    else:
        kb, banks = tmp / "kb", tmp / "test_banks"
        shutil.copytree(REPO / "kb", kb)
        shutil.copytree(REPO / "test_banks", banks)
    return seed_history(kb, banks, tmp / "results"), load_validated(kb, banks)[1]


def test_one_self_contained_file_with_a_trend_line_per_model_and_bank(
    seeded: Seeded,
) -> None:
    docs, _ = seeded
    html = render_html(docs, {})
    assert FETCHES.search(html) is None
    lines = elements(html).query("path", "trends")
    banks = [b.value for b in docs[0].aggregate.banks]
    assert sorted((a["data-model"], a["data-bank"]) for a in lines) == sorted(
        (m, b) for m in MODELS for b in [*banks, "combined"]
    )
    # Seven dates, every one known: one unbroken line of seven points.
    for a in lines:
        assert a["d"].count("M") == 1 and a["d"].count("L") == len(DATES) - 1
    marks = elements(html).query("g", "trends")
    assert [m["data-date"] for m in marks] == DATES * len(MODELS)


def test_since_last_run_names_the_planted_regression_and_the_errored_test(
    seeded: Seeded,
) -> None:
    docs, banks = seeded
    page = elements(render_html(docs, {}))
    blocks = page.query("div", "since", class_="since-model")
    assert [b["data-model"] for b in blocks] == list(MODELS)
    changes = {(r["data-test-id"], r["data-kind"]) for r in page.query("tr", "since", class_="test-row")}
    assert (planted_test(banks), "regressed") in changes
    # The other model's test that errored today after passing yesterday is a regression too.
    assert (errored_test(banks), "regressed") in changes


def test_failures_are_listed_worst_first_and_an_errored_test_as_errored(
    seeded: Seeded,
) -> None:
    docs, _ = seeded
    html = render_html(docs, {})
    rows = elements(html).query("tr", "failures")
    latest = {d.provenance.model: d for d in docs if d.provenance.date == DATES[-1]}
    shown = [r["data-test-id"] for r in rows if "data-test-id" in r]
    expected = [f.test_id for m in MODELS for f in failing_tests(latest[m])]
    assert shown == expected
    erroring = [f for f in failing_tests(latest[ERRORING_MODEL]) if f.rule == "errored"]
    assert erroring and erroring[0].reason == ERROR
    errored_rows = [r for r in rows if "is-errored" in r.get("class", "")]
    assert [r["data-test-id"] for r in errored_rows] == [f.test_id for f in erroring]
    assert f"{ERROR}</dd>" in html  # its detail holds the error, and no score


def test_topics_are_listed_worst_first(seeded: Seeded) -> None:
    docs, _ = seeded
    page = elements(render_html(docs, {}))
    latest = next(d for d in docs if (d.provenance.date, d.provenance.model) == (DATES[-1], REGRESSING_MODEL))
    scores = latest.aggregate.topic_scores
    shown = [r["data-topic"] for r in page.query("tr", "topics") if "data-topic" in r]
    per_model = shown[len(shown) // 2 :]  # the second model's block
    averages = [scores[t].average for t in per_model]
    assert len(per_model) == len(scores)
    assert averages == sorted(averages, key=lambda a: -1 if a is None else a)


def test_data_is_escaped_never_markup() -> None:
    bad = doc([sem("S-1", [], error="<script>alert(1)</script>")], model='m"<i>', date="2026-11-20")
    html = render_html([bad], {})
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<i>" not in html and 'data-model="m&#34;&lt;i&gt;"' in html


def test_the_stored_comparison_of_the_latest_date_is_the_one_shown() -> None:
    first = doc([sem("S-1", ["a", "b"])], date="2026-11-19")
    second = doc([sem("S-1", ["b"])], date="2026-11-20")
    stored = against_baseline(second, None, ["2026-11-19: unreadable (not JSON)"])
    # The stored diff of the latest date wins (it is what `run` printed); an older one does not.
    assert latest_comparison([first, second], stored) is stored
    computed = latest_comparison([first, second], against_baseline(first, None))
    assert computed.baseline_date == "2026-11-19" and computed.diff is not None
    since = build_report([first, second], {"m": stored}).models[0].since
    assert since.baseline_date is None and "no usable baseline" in since.verdict
    assert "2026-11-19: unreadable (not JSON)" in since.verdict


def test_a_date_with_an_unknown_score_breaks_the_line() -> None:
    known = [doc([sem("S-1", ["a", "b"])], date=d) for d in ("2026-11-18", "2026-11-20")]
    unknown = doc([sem("S-1", [], error="down")], date="2026-11-19")
    chart = build_report([known[0], unknown, known[1]], {}).models[0].chart
    combined = next(s for s in chart.series if s.bank == "combined")
    assert combined.path.count("M") == 2 and "L" not in combined.path
    assert [p.date for p in combined.points] == ["2026-11-18", "2026-11-20"]
    assert [h for _, _, h in chart.health] == ["EXCELLENT", "UNKNOWN", "EXCELLENT"]


def test_reading_history_by_model_and_dates_names_an_unreadable_file(tenant: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    seed_history(tenant / "kb.yaml", tenant / "banks", results)
    root = UPath(str(results))
    some = read_history(root, {MODELS[0]}, DATES[1], DATES[3])
    assert [d.provenance.model for d in some.docs] == [MODELS[0]] * 3
    assert [d.provenance.date for d in some.docs] == DATES[1:4]
    assert [d.provenance.date for d in read_history(root, {MODELS[0]}, last=2).docs] == DATES[-2:]
    broken = results / MODELS[0] / DATES[2] / RESULTS_FILE
    broken.write_text("{not json")
    with pytest.raises(DocumentError, match=re.escape(str(broken))):
        read_history(root, {MODELS[0]})
    lenient = read_history(root, {MODELS[0]}, strict=False)
    assert len(lenient.docs) == len(DATES) - 1 and str(broken) in lenient.unreadable[0]


def test_a_test_in_full_shows_what_each_bank_expected_and_got_trial_by_trial() -> None:
    semantic = [sem("S-1", ["a", "x"], candidates=["a", "x", "b"], trial=t) for t in (0, 1)]
    details = details_by_test(semantic, 60)["S-1"]
    assert [d.heading for d in details] == [
        "S-1: trial 1 (mean 70.0 over 2 trials)",
        "S-1: trial 2 (mean 70.0 over 2 trials)",
    ]
    fields = dict(details[0].fields)
    assert fields["Score"] == "70 (Concerning)" and fields["Expected primary"] == "a"
    assert "-20 false positive: x" in fields["Penalties"]
    selections, candidates = details[0].tables
    assert selections.rows == [("1", "a", "primary", ""), ("2", "x", "not expected", "")]
    assert [r[1:3] for r in candidates.rows] == [("a", "primary"), ("x", "not expected"), ("b", "secondary")]
    errored = details_by_test([sem("S-2", [], error="down")], 60)["S-2"][0]
    assert errored.errored and dict(errored.fields)["Error"] == "down" and "Score" not in dict(errored.fields)
    assert dict(details_by_test([state("ST-1", [])], 60)["ST-1"][0].fields)["Missing"] == "h1"
    crisis = dict(details_by_test([pattern("P-1", False)], 60)["P-1"][0].fields)
    assert crisis["Type"] == "crisis (critical)" and crisis["Matched"] == "—" and "Critical failure" in crisis
    assert dict(details_by_test([always("A-1", [])], 60)["A-1"][0].fields)["Missing"] == "p"


def test_every_test_of_the_latest_evaluation_is_listed_with_its_outcome(seeded: Seeded) -> None:
    docs, banks = seeded
    rows = elements(render_html(docs, {})).query("tr", "all-tests", tabindex="0")
    latest = [d for d in docs if d.provenance.date == DATES[-1]]
    ids = [r.test_id for d in latest for r in (*d.semantic, *d.state, *d.pattern, *d.always)]
    assert [r["data-test-id"] for r in rows] == ids
    per_model = dict(zip(MODELS, (rows[: len(rows) // 2], rows[len(rows) // 2 :]), strict=True))
    classes = {r["data-test-id"]: r["class"] for r in per_model[ERRORING_MODEL]}
    assert classes[errored_test(banks)] == "test-row outcome-error"
    assert {c for i, c in classes.items() if i != errored_test(banks)} <= {
        "test-row outcome-pass",
        "test-row outcome-fail",
    }

"""Issue 42's adversary, end to end on a copy of the second domain: hostile text in every text
field of the project and in every answer of a hostile HTTP system, run through the real command
line on two dates with two models. The PR comment, report.md, regression_diff.md and
model_comparison.md, rendered as GitHub renders them, make nothing from data; the HTML report
and the JUnit files stay clean; the console shows no raw control byte. And a `system.url` with
user info and a token leaves neither secret in any file, Dagster event or console line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.core.inputs.contract import SystemRequest
from tests.rendered_markdown import HOSTILE, MARKER, injected
from tests.system_under_test import Answer, ReferenceSystem, serve
from tests.test_inert_console import raw_controls

pytestmark = pytest.mark.slow

D1, D2 = "2026-11-20", "2026-11-21"
# A label (topic, category) cannot hold control characters or surrounding space: the rest can.
LABEL = '"><img src=x onerror=PWN()> [PWN](javascript:alert(1)) @everyone'
# The one link our markdown makes: report.md's "since last run" names the regression diff.
OUR_LINKS = {"regression_diff.md"}


def _hostile(i: int) -> str:
    return HOSTILE[i % len(HOSTILE)]


def _hostile_project(tenant: Path) -> None:
    """Every text field of the tenant copy holds a payload (ids keep their shape: validated)."""
    kb_file = tenant / "kb.yaml"
    kb = yaml.safe_load(kb_file.read_text())
    kb["kb_version"] = f"v1 {HOSTILE[0]}"
    kb["vocabulary"]["categories"].append(LABEL)
    for i, entity in enumerate(kb["entities"]):
        entity["title"] = f"t{i} {_hostile(i)}"[:300]
        entity["summary"] = f"s{i} {_hostile(i + 1)}"
    kb_file.write_text(yaml.safe_dump(kb, allow_unicode=True))
    for path in (tenant / "banks").rglob("*.json"):
        bank = json.loads(path.read_text())
        for i, test in enumerate(bank.get("tests", [])):
            test["name"] = _hostile(i)
            if "topics" in test:
                test["topics"] = [*test["topics"], LABEL]
                test["category"] = LABEL if i % 2 else test["category"]
                test["prompt"] = f"{test['prompt']} {_hostile(i + 3)}"
        path.write_text(json.dumps(bank))


class HostileSystem(ReferenceSystem):
    """The reference double, until `hostile`: then every answer carries payloads (unknown ids,
    reasons, matched text), some tests lose their primary to a payload, and one fails with a
    payload as its HTTP 500 body."""

    hostile = False

    def _index(self, request: SystemRequest) -> int:
        return next(i for i, t in enumerate(self.banks.semantic_tests) if t.prompt == request.message)

    def received(self, request: SystemRequest) -> bool:
        super().received(request)
        return self.hostile and request.mechanism.value == "semantic" and self._index(request) == 1

    def failure_body(self, request: SystemRequest) -> bytes:
        return json.dumps({"error": HOSTILE[0], "detail": HOSTILE[6]}).encode()

    def semantic(self, request: SystemRequest) -> Answer:
        answer = super().semantic(request)
        if not self.hostile:
            return answer
        i = self._index(request)
        picks: list[dict[str, Any]] = [
            {**s, "reason": _hostile(i + k)} for k, s in enumerate(answer["selections"])
        ]
        if i % 2 == 0:
            picks = [{"entity_id": _hostile(i), "reason": _hostile(i + 1)}, *picks[1:]]
        candidates = [*answer["candidates"], {"entity_id": _hostile(i + 2), "score": 0.01}]
        return {"candidates": candidates, "selections": picks}

    def state(self, request: SystemRequest) -> Answer:
        answer = super().state(request)
        return {"triggered_handlers": [*answer["triggered_handlers"], HOSTILE[4]]} if self.hostile else answer

    def pattern(self, request: SystemRequest) -> Answer:
        answer = super().pattern(request)
        if not self.hostile:
            return answer
        matches = [
            {**m, "matched_text": HOSTILE[0], "pattern": HOSTILE[1]} for m in answer["pattern_matches"]
        ]
        return {"pattern_matches": [*matches, {"entity_id": HOSTILE[5], "matched_text": HOSTILE[3]}]}

    def always(self, request: SystemRequest) -> Answer:
        answer = super().always(request)
        return {"always_loaded": [*answer["always_loaded"], HOSTILE[2]]} if self.hostile else answer


def _models(path: Path, urls: dict[str, str]) -> None:
    models = {
        key: {"system": {"kind": "http", "url": url}, "retry": {"max_attempts": 2, "backoff_s": 0}}
        for key, url in urls.items()
    }
    path.write_text(yaml.safe_dump({"schema_version": 1, "models": models}))


def _locations(work: Path) -> list[str]:
    return [
        *("--models-file", str(work / "models.yaml"), "--results-dir", str(work / "results")),
        *("--storage-dir", str(work / "storage"), "--cache-dir", str(work / ".cache")),
    ]


def _run(work: Path, tenant: Path, date: str, *models: str, extra: tuple[str, ...] = ()) -> int:
    data = ["--kb", str(tenant / "kb.yaml"), "--banks-dir", str(tenant / "banks"), "--date", date]
    return main(["run", *(a for m in models for a in ("--model", m)), *data, *_locations(work), *extra])


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    return tmp_path


_URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data"}


class _HtmlFindings(HTMLParser):
    """What in the HTML report could act: elements that load or run, handlers, script URLs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        if tag in {"img", "iframe", "object", "embed", "image", "foreignobject", "link", "base"}:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            url = name in _URL_ATTRIBUTES and "javascript:" in (value or "").lower()
            if name.startswith("on") or url or MARKER in name:
                self.found.append(f"<{tag} {name}={value!r}>")


def _html_findings(html: str) -> list[str]:
    reader = _HtmlFindings()
    reader.feed(html)
    return reader.found + ([f"{reader.scripts} scripts"] if reader.scripts != 1 else [])


JUNIT_TAGS = {"testsuites", "testsuite", "testcase", "failure", "error", "skipped", "properties", "property"}


def _junit_findings(path: Path) -> list[str]:
    raw = path.read_text(encoding="utf-8")
    tags = {e.tag for e in ET.parse(path).getroot().iter()}
    return [f"tag {t}" for t in tags - JUNIT_TAGS] + [
        f"raw {c!r}" for c in raw_controls(raw.replace("\n", ""))
    ]


def test_hostile_text_and_a_hostile_system_make_nothing_in_any_output(
    tenant: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hostile_project(tenant)
    kb, banks = tenant / "kb.yaml", tenant / "banks"
    override = ["override", "T-RENT-001", "--primary", "rent_arrears", "--by", HOSTILE[5]]
    assert main([*override, "--reason", HOSTILE[0], "--kb", str(kb), "--banks-dir", str(banks)]) == 0
    team, good = HostileSystem(kb, banks), ReferenceSystem(kb, banks)
    with serve(team) as team_url, serve(good) as good_url:
        _models(work / "models.yaml", {"team": team_url, "good": good_url})
        assert _run(work, tenant, D1, "team", "good") in (0, 1)
        team.hostile = True
        assert _run(work, tenant, D2, "team", "good", extra=("--junit", str(work / "run.xml"))) == 1
    comment_junit = work / "diff.xml"
    diff = ["diff", f"team@{D1}", f"team@{D2}", "--format", "markdown", "--junit", str(comment_junit)]
    runs = capsys.readouterr()
    assert main([*diff, "--results-dir", str(work / "results")]) == 1
    comment, diff_err = capsys.readouterr()
    assert main(["report", "--html", str(work / "report.html"), "--results-dir", str(work / "results")]) == 0
    assert main(["diff", f"team@{D1}", f"team@{D2}", "--results-dir", str(work / "results")]) == 1
    console = "".join((*runs, diff_err, *capsys.readouterr()))

    run_dir = work / "results" / "team" / D2
    markdown = {
        "PR comment": comment,
        "report.md": (run_dir / "report.md").read_text(),
        "regression_diff.md": (run_dir / "regression_diff.md").read_text(),
        "model_comparison.md": next((work / "results").rglob("model_comparison.md")).read_text(),
    }
    for name, md in markdown.items():
        assert MARKER in md, f"{name} shows none of the data: the test would prove nothing"
        assert injected(md, OUR_LINKS) == [], name
    assert "\\x1b[2J" in markdown["report.md"]  # the ESC of a payload, shown escaped

    html = (work / "report.html").read_text()
    assert MARKER in html and _html_findings(html) == []
    assert "\\x1b[2J" in html and raw_controls(html.replace("\n", "")) == []
    for junit in (work / "run.xml", comment_junit):
        assert MARKER in junit.read_text() and _junit_findings(junit) == [], junit
    assert MARKER in console and "\\x1b[2J" in console and raw_controls(console) == []
    # A newline in data never starts a line of its own (a payload's heading, underline, fold).
    starts = (MARKER, "# ", "===", "</")
    assert not [line for line in console.splitlines() if line.lstrip().startswith(starts)], console


def test_a_system_urls_credentials_and_token_are_never_written_or_shown(
    tenant: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user, password, token = "svc-user-7f3a", "pass-9c1e", "tok-5d2b"
    kb, banks = tenant / "kb.yaml", tenant / "banks"
    system = ReferenceSystem(kb, banks)
    with serve(system) as url:
        secret_url = url.replace("http://", f"http://{user}:{password}@") + f"?token={token}&mode=plain"
        _models(work / "models.yaml", {"team": secret_url})
        assert _run(work, tenant, D1, "team") in (0, 1)
        assert _run(work, tenant, D2, "team", extra=("--junit", str(work / "run.xml"), "--dry-run")) == 0
        assert _run(work, tenant, D2, "team", extra=("--junit", str(work / "run.xml"))) in (0, 1)
    assert system.calls["semantic"] > 0  # the whole URL was called
    assert main(["models", "--models-file", str(work / "models.yaml")]) == 0
    assert main(["report", "--html", str(work / "report.html"), "--results-dir", str(work / "results")]) == 0
    console = capsys.readouterr()
    assert "mode=plain" in console.out  # `models` names the URL, redacted
    secrets = [s.encode() for s in (user, password, token)]
    written = [p for p in work.rglob("*") if p.is_file() and p.name != "models.yaml"]
    assert any(p.name == "results.json" for p in written) and any("dagster_home" in p.parts for p in written)
    leaked = [str(p) for p in written if any(s in p.read_bytes() for s in secrets)]
    assert leaked == []
    assert not any(s.decode() in console.out + console.err for s in secrets)

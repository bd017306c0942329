"""An imported collection is shown by the user's own ids (`<dbpedia:Oceanic_Airlines>`, `<q:chess>`)
on every surface: `run`'s console, report.md, report.html, the JUnit file, `show` and `diff`,
never by the KB and test ids they were mapped to. On a BEIR set of awkward ids and on the second
domain imported as BEIR."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.core.inputs.external_ids import mapped_entity_id, mapped_test_id
from eval_pipeline.core.inputs.file_reader import load_input
from tests.beir_fixture import DOCUMENTS, TOPICS, tenant_as_beir, write_beir
from tests.conftest import TENANT

DAYS = ("2026-11-19", "2026-11-20")
AIRLINE = "<dbpedia:Oceanic_Airlines>"  # what the chess question is judged against


def _awkward(root: Path) -> Path:
    """Ids of DBpedia's shape; the chess question judged against the airline, which the
    retriever has no reason to select: a failing test that names both."""
    documents = [
        *DOCUMENTS,
        *((f"<dbpedia:{t}_{n}>", "", x) for t, *xs, _ in TOPICS for n, x in enumerate(xs, 1)),
    ]
    queries = [(f"<q:{t}>", question) for t, _, _, question in TOPICS]
    qrels = [(f"<q:{t}>", AIRLINE if t == "chess" else f"<dbpedia:{t}_1>", 2) for t, *_ in TOPICS]
    return write_beir(root, documents, queries, qrels)


def _tenant(root: Path) -> Path:
    return tenant_as_beir(TENANT, root)


def _originals(src: Path) -> tuple[set[str], set[str]]:
    documents = {str(json.loads(line)["_id"]) for line in (src / "corpus.jsonl").read_text().splitlines()}
    queries = {str(json.loads(line)["_id"]) for line in (src / "queries.jsonl").read_text().splitlines()}
    return documents, queries


@pytest.mark.parametrize("collection", [_awkward, _tenant], ids=["dbpedia-ids", "tenant-as-beir"])
def test_every_surface_shows_the_collections_own_ids(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    collection: Callable[[Path], Path],
) -> None:
    src = collection(tmp_path / "src")
    documents, queries = _originals(src)
    mapped = {mapped_entity_id(d) for d in documents} | {mapped_test_id(q) for q in queries}
    mapped -= documents | queries  # ids that fit are kept as they are
    assert mapped  # the collection's ids were mapped on import
    assert (
        main(
            [
                "import-beir",
                str(src),
                "--kb",
                str(tmp_path / "kb"),
                "--banks-dir",
                str(tmp_path / "test_banks"),
            ]
        )
        == 0
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / ".dagster_home"))
    for name in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    capsys.readouterr()
    surfaces: dict[str, str] = {}
    for day in DAYS:
        main(
            [
                "run",
                "--model",
                "local-minilm",
                "--date",
                day,
                "--fail-under",
                "0",
                "--junit",
                f"junit-{day}.xml",
            ]
        )
        surfaces[f"console {day}"] = capsys.readouterr().out
    run_dir = tmp_path / "results" / "local-minilm" / DAYS[1]
    surfaces["report.md"] = (run_dir / "report.md").read_text()
    surfaces["report.html"] = html.unescape((run_dir / "report.html").read_text())
    junit = (tmp_path / f"junit-{DAYS[1]}.xml").read_text()
    surfaces["junit"] = html.unescape(junit)
    for form in ("text", "markdown", "json"):
        main(["diff", f"local-minilm@{DAYS[0]}", f"local-minilm@{DAYS[1]}", "--format", form])
        surfaces[f"diff {form}"] = capsys.readouterr().out
    main(["show", "--model", "local-minilm"])
    surfaces["show"] = capsys.readouterr().out
    for name, text in surfaces.items():
        assert not [m for m in mapped if m in text], name
    # The JUnit cases are named by the queries' own ids (every query of these sets is judged).
    named = {case.get("name") for case in ET.fromstring(junit).iter("testcase")}
    shown_queries = [q for q in queries if mapped_test_id(q) != q]
    assert set(shown_queries) <= named
    assert any(q in surfaces["report.md"] for q in shown_queries)
    assert any(q in surfaces["report.html"] for q in shown_queries)
    if collection is _awkward:
        # The failing test and what it selected, as the user wrote them (markdown escapes `<`).
        chosen = "<dbpedia:chess_1>"
        assert "<q:chess>" in surfaces[f"console {DAYS[1]}"] and chosen in surfaces[f"console {DAYS[1]}"]
        assert "\\<q:chess>" in surfaces["report.md"] and "\\" + chosen in surfaces["report.md"]
        assert "<q:chess>" in surfaces["report.html"] and chosen in surfaces["report.html"]
        assert "<q:chess>" in named
    # Stored results keep the KB's ids: the mapping is for what people read.
    stored = load_input(run_dir / "results.json")
    assert stored["semantic"][0]["test_id"] in {mapped_test_id(q) for q in queries}

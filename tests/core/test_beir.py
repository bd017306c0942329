"""BEIR import (readers, id mapping, the written project) and the TREC export, in the pure core."""

from __future__ import annotations

import json
import re
from pathlib import Path

import ir_measures
import pytest

from eval_pipeline.core.inputs.banks import Expectations
from eval_pipeline.core.inputs.beir import BeirError, read_qrels
from eval_pipeline.core.inputs.beir_project import ImportTargets, first_sentence, import_beir
from eval_pipeline.core.inputs.external_ids import (
    OriginalIds,
    carriage_problem,
    mapped_entity_id,
    mapped_test_id,
)
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, final_ranking
from eval_pipeline.core.report.trec import (
    TrecIdError,
    qrel_rows,
    qrels_text,
    run_rows,
    run_text,
)
from eval_pipeline.core.scoring.metrics import judgments
from eval_pipeline.core.scoring.results import ResultStatus, SemanticResult
from tests.beir_fixture import (
    DOCUMENTS,
    JUDGED_QUERY_IDS,
    ORIGINAL_DOC_IDS,
    QRELS,
    tenant_as_beir,
    write_beir,
)

ENTITY_ID = re.compile(r"^[a-z][a-z0-9_]*$")
TEST_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
AWKWARD = [
    "<dbpedia:Oceanic_Airlines>",
    "59f11d5004ed84ad_chunk_0",
    "a/b/c",
    "Zürich_Ω",
    "Ω",
    "12345",
    "0",
    "x" * 300,
    "already_fine",
    "has__double",
    "CamelCase",
    "MS-MARCO.7",
]


def _targets(tmp_path: Path) -> ImportTargets:
    return ImportTargets(
        tmp_path / "proj" / "kb", tmp_path / "proj" / "banks", tmp_path / "proj" / "models.yaml"
    )


def _import(tmp_path: Path, src: Path) -> ImportTargets:
    targets = _targets(tmp_path)
    import_beir(src, "test", "fixture", targets, "schema_version: 1\nmodels: {}\n")
    return targets


@pytest.mark.parametrize("original", AWKWARD)
def test_any_id_maps_to_a_valid_entity_and_test_id_deterministically(original: str) -> None:
    entity, test = mapped_entity_id(original), mapped_test_id(original)
    assert ENTITY_ID.match(entity) and len(entity) <= 120
    assert TEST_ID.match(test) and len(test) <= 80
    assert (entity, test) == (mapped_entity_id(original), mapped_test_id(original))


def test_ids_that_fit_are_kept_and_the_rest_never_collide() -> None:
    assert mapped_entity_id("already_fine") == "already_fine"
    assert mapped_test_id("MS-MARCO.7") == "MS-MARCO.7"
    assert mapped_entity_id("has__double") != "has__double"  # `__` marks a mapped id
    # Case and punctuation variants slug alike but stay apart, as do kept and mapped ids.
    originals = sorted({*AWKWARD, "a/b/C", "A/B/C", "a-b-c", "a_b_c", *map(str, range(2000))})
    for mapping in (mapped_entity_id, mapped_test_id):
        mapped = [mapping(o) for o in originals]
        assert len(set(mapped)) == len(originals)


def test_ids_trec_cannot_carry_are_named() -> None:
    assert carriage_problem("doc 1") == "'doc 1' holds whitespace, which TREC files cannot carry"
    assert carriage_problem("doc\t1") is not None and carriage_problem("a\x00b") is not None
    assert carriage_problem("") == "is empty"
    assert carriage_problem("<dbpedia:Ünï/1>") is None


def test_summary_is_the_first_sentence_bounded() -> None:
    assert first_sentence("\nFirst one. Second one.\nThird", 200) == "First one."
    assert first_sentence("word " * 100, 20) == "word word word word…"


def test_import_writes_a_project_that_validates_with_graded_gains_and_original_ids(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    counts = import_beir(write_beir(tmp_path / "src"), "test", "fixture", targets, "models: {}\n")
    assert (counts.documents, counts.tests, counts.judgments, counts.zero_gain_judgments) == (6, 4, 7, 2)
    assert (counts.unjudged_queries, counts.unrelevant_queries) == (1, 1)
    kb, banks = load_validated(targets.kb_dir, targets.banks_dir)
    assert kb.name == "fixture" and {e.source_id for e in kb.entities} == ORIGINAL_DOC_IDS
    by_source = {e.source_id: e for e in kb.entities}
    airline = by_source["<dbpedia:Oceanic_Airlines>"]
    assert (airline.title, airline.content) == ("Oceanic Airlines", DOCUMENTS[0][2])
    assert by_source["59f11d5004ed84ad_chunk_0"].title == "Volcanoes erupt when magma rises to the surface."
    tests = {t.source_id: t for t in banks.semantic_tests}
    assert set(tests) == JUDGED_QUERY_IDS
    # Grade 0 is kept as "judged not relevant".
    assert tests["q:1"].relevant == {airline.entity_id: 2, by_source["12345"].entity_id: 0}
    assert targets.models_file.read_text() == "models: {}\n"


def test_qrels_header_is_skipped_only_when_it_is_the_beir_header(tmp_path: Path) -> None:
    with_header = [j.doc_id for j in read_qrels(write_beir(tmp_path / "a"), "test")]
    without = [j.doc_id for j in read_qrels(write_beir(tmp_path / "b", header=False), "test")]
    assert with_header == without == [d for _, d, _ in QRELS]
    src = write_beir(tmp_path / "c", header=False)
    qrels = src / "qrels" / "test.tsv"
    qrels.write_text("qid\tdocid\trel\n" + qrels.read_text())
    with pytest.raises(BeirError, match=r"test.tsv:1: qid: score: 'rel' is not a whole number"):
        list(read_qrels(src, "test"))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda s: (s / "corpus.jsonl").write_text('{"_id": "d1", "text": "ok"}\nnot json\n'),
            r"corpus.jsonl:2: not JSON",
        ),
        (lambda s: (s / "queries.jsonl").unlink(), r"queries.jsonl: file not found"),
        (
            lambda s: (s / "qrels" / "test.tsv").write_text("q:1\tnowhere\t1\n"),
            r"test.tsv:1: q:1: corpus-id: unknown document 'nowhere'",
        ),
        (
            lambda s: (s / "qrels" / "test.tsv").write_text("ghost\t12345\t1\n"),
            r"test.tsv:1: ghost: query-id: unknown query",
        ),
        (
            lambda s: (s / "corpus.jsonl").write_text('{"_id": "doc 7", "text": "spaced"}\n'),
            r"corpus.jsonl:1: _id: 'doc 7' holds whitespace, which TREC files cannot carry",
        ),
        (
            lambda s: (s / "qrels" / "test.tsv").write_text("q:1\t12345\t-1\n"),
            r"test.tsv:1: q:1: score: -1 is outside 0..1000",
        ),
        (
            lambda s: (s / "qrels" / "test.tsv").write_text("only-zero\tZürich_Ω\t0\n"),
            r"test.tsv: no query has a judgment with gain > 0",
        ),
    ],
)
def test_bad_beir_input_names_file_line_and_field_and_writes_nothing(
    tmp_path: Path, damage: object, message: str
) -> None:
    src = write_beir(tmp_path / "src")
    damage(src)  # type: ignore[operator]
    with pytest.raises(BeirError, match=message) as caught:
        _import(tmp_path, src)
    assert "\n" not in str(caught.value)
    # Atomic: no target and no temporary folder is left.
    assert list((tmp_path / "proj").iterdir()) == []


def test_an_existing_target_is_refused(tmp_path: Path) -> None:
    targets = _import(tmp_path, write_beir(tmp_path / "src"))
    with pytest.raises(BeirError, match="kb: exists and is not an empty folder"):
        import_beir(tmp_path / "src", "test", "again", targets, "")
    beside = ImportTargets(
        targets.kb_dir.parent / "kb2", targets.banks_dir.parent / "banks2", targets.models_file
    )
    with pytest.raises(BeirError, match=r"models\.yaml: exists; import writes a new project"):
        import_beir(tmp_path / "src", "test", "again", beside, "")
    assert not beside.kb_dir.exists()


def test_tenant_domain_imports_as_beir_and_validates(tmp_path: Path) -> None:
    tenant = Path(__file__).resolve().parents[1] / "fixtures" / "tenant_domain"
    targets = _import(tmp_path, tenant_as_beir(tenant, tmp_path / "src"))
    kb, banks = load_validated(targets.kb_dir, targets.banks_dir)
    by_source = {e.source_id: e.entity_id for e in kb.entities}
    rent = next(t for t in banks.semantic_tests if t.source_id == "T-RENT-001:q")
    assert rent.relevant == {by_source["RENT_ARREARS"]: 2}
    assert all(e.entity_id != e.source_id for e in kb.entities)


def _result(test_id: str, ranked: list[str], picks: int, trial: int = 0, ok: bool = True) -> SemanticResult:
    return SemanticResult(
        test_id=test_id,
        status=ResultStatus.SCORED if ok else ResultStatus.ERRORED,
        model="m",
        trial=trial,
        category="c",
        topics=[],
        prompt="p",
        expectations=Expectations(relevant={"b": 3, "z": 0}, expected_secondary=["c", "b"]),
        expectation_source="original",
        candidates=[Candidate(entity_id=e, score=1.0 - i / 10) for i, e in enumerate(ranked)],
        selections=[Selection(entity_id=e, rank=i + 1) for i, e in enumerate(reversed(ranked[:picks]))],
    )


def test_qrels_gains_keep_graded_gains_and_a_stated_gain_wins() -> None:
    exp = Expectations(
        expected_primary=["p", "q"], expected_any=["a"], expected_secondary=["s"], relevant={"q": 1, "z": 0}
    )
    assert judgments(exp) == {"s": 1, "a": 2, "p": 2, "q": 1, "z": 0}


def test_run_is_the_final_ranking_in_original_ids_with_strictly_falling_scores(tmp_path: Path) -> None:
    results = [
        _result("t1", ["a", "b", "c", "d"], picks=2),
        _result("t1", ["d", "c", "b", "a"], picks=1, trial=1),  # a later trial is not the run
        _result("t2", ["a"], picks=0, ok=False),
        _result("t3", ["c", "a"], picks=0, ok=False),
        _result("t3", ["c", "a"], picks=1, trial=1),  # the first scored trial stands
    ]
    ids = OriginalIds(documents={"a": "<doc:A>", "b": "b/1"}, queries={"t1": "q:1"})
    run = run_rows(results, ids)
    assert [(r.query_id, r.doc_id) for r in run] == [
        ("q:1", "b/1"),
        ("q:1", "<doc:A>"),
        ("q:1", "c"),
        ("q:1", "d"),
        ("t3", "c"),
        ("t3", "<doc:A>"),
    ]
    first = final_ranking(results[0].selections, results[0].candidates)
    assert [ids.document(e) for e in first] == [r.doc_id for r in run[:4]]
    scores = [r.score for r in run[:4]]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    text = run_text(run, "m")
    assert text.splitlines()[:2] == ["q:1 Q0 b/1 1 4.0 m", "q:1 Q0 <doc:A> 2 3.0 m"]
    qrels = qrel_rows(results, ids)
    assert {(q.query_id, q.doc_id, q.relevance) for q in qrels if q.query_id == "q:1"} == {
        ("q:1", "b/1", 3),
        ("q:1", "c", 1),
        ("q:1", "z", 0),
    }
    # The files read back with ir_measures (pytrec_eval underneath) give the rows written.
    (tmp_path / "run.trec").write_text(text)
    (tmp_path / "qrels.trec").write_text(qrels_text(qrels))
    read_run = list(ir_measures.read_trec_run(str(tmp_path / "run.trec")))  # type: ignore[no-untyped-call]
    read_qrels = list(ir_measures.read_trec_qrels(str(tmp_path / "qrels.trec")))  # type: ignore[no-untyped-call]
    assert read_run == run
    assert [(q.query_id, q.doc_id, q.relevance) for q in read_qrels] == qrels
    # t2 errored in its only trial: in neither file, so no tool can count it differently.
    assert "t2" not in {q.query_id for q in qrels}
    values = {
        (m.query_id, str(m.measure))
        for m in ir_measures.iter_calc([ir_measures.nDCG @ 10], read_qrels, read_run)
    }
    assert {q for q, _ in values} == {"q:1", "t3"}


def test_an_original_id_trec_cannot_carry_is_refused() -> None:
    with pytest.raises(TrecIdError, match="document id of 'a': 'x y' holds whitespace"):
        run_rows([_result("t1", ["a"], picks=1)], OriginalIds(documents={"a": "x y"}, queries={}))


def test_bank_is_json_with_tests_in_query_order(tmp_path: Path) -> None:
    targets = _import(tmp_path, write_beir(tmp_path / "src"))
    bank = json.loads((targets.banks_dir / "semantic" / "parent_test_bank.json").read_text())
    assert [t["source_id"] for t in bank["tests"]] == ["q:1", "Q/2", "3", "ünï"]
    assert list(bank["tests"][0]) == ["test_id", "source_id", "category", "prompt", "relevant"]


def test_passage_text_is_kept_exactly(tmp_path: Path) -> None:
    tricky = "  leading: spaces\n\n# not a comment\ttab 'quotes' \"double\" – ünï ✓\n- not a list\ntrailing  "
    documents = [("d1", "key: value #1", tricky), ("d2", "", "x" * 5000)]
    src = write_beir(tmp_path / "src", documents, [("q1", "tricky")], [("q1", "d1", 1)])
    targets = _import(tmp_path, src)
    kb, _ = load_validated(targets.kb_dir, targets.banks_dir)
    assert {e.source_id: (e.title, e.content) for e in kb.entities} == {
        "d1": ("key: value #1", tricky),
        "d2": ("x" * 119 + "…", "x" * 5000),
    }


def test_a_byte_order_mark_and_windows_line_ends_are_not_data(tmp_path: Path) -> None:
    src = write_beir(tmp_path / "src")
    qrels = src / "qrels" / "test.tsv"
    qrels.write_bytes(b"\xef\xbb\xbf" + qrels.read_bytes().replace(b"\n", b"\r\n"))
    assert [(j.query_id, j.doc_id, j.gain) for j in read_qrels(src, "test")] == QRELS

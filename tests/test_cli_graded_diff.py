"""`diff` end to end on an imported graded set: import a BEIR folder, evaluate it (offline model),
edit the KB so that two queries lose their best relevant passage, evaluate again, and diff. The
diff names exactly those queries with the passages' original ids, in JSON and in the PR comment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.core.report.diff_comment import MAX_LINES
from tests.beir_fixture import all_or_nothing_beir

RUNS = Path("results") / "_scoped" / "banks-semantic" / "local-minilm"
GUTTED = ("bees/1", "glaciers/1")  # each the best (gain 2) passage of its topic's question


def _gut(kb: Path, original: str) -> None:
    """The passage's words replaced by unrelated ones: the retriever no longer finds it."""
    for path in (kb / "entities").glob("*.yaml"):
        entity = yaml.safe_load(path.read_text(encoding="utf-8"))
        if entity.get("source_id") == original:
            for key in ("title", "summary", "content"):
                entity[key] = "Opening hours of the municipal library on public holidays."
            path.write_text(yaml.safe_dump(entity, allow_unicode=True, sort_keys=False), encoding="utf-8")
            return
    raise AssertionError(f"no entity imported from {original}")


def test_diff_names_the_queries_whose_best_passage_dropped_with_original_ids(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = all_or_nothing_beir(workdir / "src")
    assert main(["import-beir", str(src), "--kb", "proj/kb", "--banks-dir", "proj/test_banks"]) == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(workdir / "proj")
        run = ["run", "--banks", "semantic", "--model", "local-minilm"]
        assert main([*run, "--date", "2026-11-20"]) == 0
        for original in GUTTED:
            _gut(Path("kb"), original)
        main([*run, "--date", "2026-11-21"])
        base, head = (str(RUNS / d / "results.json") for d in ("2026-11-20", "2026-11-21"))
        capsys.readouterr()
        assert main(["diff", base, head, "--format", "json"]) == 1  # the two queries regressed
        out = json.loads(capsys.readouterr().out)
        assert main(["diff", base, head, "--format", "markdown"]) == 1
        comment = capsys.readouterr().out
    deltas = out["diff"]["deltas"]
    dropped = {d["best_dropped"]["query_id"]: d for d in deltas if "best_dropped" in d}
    assert set(dropped) == {"q-bees", "q-glaciers"}
    for query, original in zip(("q-bees", "q-glaciers"), GUTTED, strict=True):
        entities = dropped[query]["best_dropped"]["entities"]
        assert [(e["original_id"], e["gain"], e["base_rank"]) for e in entities] == [(original, 2, 1)]
        assert entities[0]["entity_id"] == original  # mapped in the KB, shown as the user wrote it
        ndcg = dropped[query]["ndcg"]
        assert (
            ndcg["after"] < ndcg["before"] and abs(ndcg["delta"] - (ndcg["after"] - ndcg["before"])) < 1e-12
        )
    # Every graded test scored on both sides carries its nDCG@10 pair; the bank-level comparison too.
    assert sum("ndcg" in d for d in deltas) == len(deltas) == 9
    graded = out["diff"]["graded_statistics"]
    assert graded["tests"] == 9 and graded["unit"] == "nDCG@10 points" and graded["mean_difference"] < 0
    assert len(comment.splitlines()) <= MAX_LINES
    assert "<details><summary>Best relevant dropped (2)</summary>" in comment
    assert all(f"{original} (gain 2, was #1)" in comment for original in GUTTED)
    assert "**statistics (graded nDCG@10)**:" in comment

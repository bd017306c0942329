"""BEIR folders the tests build themselves (no download): awkward ids, graded and grade-0
judgments, a query without judgments, and the tenant domain's KB and bank as a BEIR set."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.core.inputs.file_reader import load_input

QRELS_HEADER = "query-id\tcorpus-id\tscore\n"

# (original id, title, text): angle brackets and a colon, a chunk id, slashes, unicode, numeric.
DOCUMENTS: list[tuple[Any, str, str]] = [
    (
        "<dbpedia:Oceanic_Airlines>",
        "Oceanic Airlines",
        "Oceanic Airlines flies long-haul routes across the Pacific.",
    ),
    ("59f11d5004ed84ad_chunk_0", "", "Volcanoes erupt when magma rises to the surface. Lava flows far."),
    ("a/b:c", "Espresso", "Espresso is coffee brewed by forcing hot water through finely ground beans."),
    ("Zürich_Ω", "Chess openings", "The Sicilian Defence is a popular chess opening for black."),
    (12345, "Tides", "Tides are caused by the gravitational pull of the moon and the sun."),
    ("plain_doc", "Bread", "Sourdough bread rises with wild yeast and lactic acid bacteria."),
]
QUERIES: list[tuple[str, str]] = [
    ("q:1", "which airline flies across the pacific"),
    ("Q/2", "why do volcanoes erupt"),
    ("3", "how is espresso made"),
    ("ünï", "what causes the tides"),
    ("only-zero", "a good chess opening for black"),
    ("unjudged", "how does sourdough rise"),
]
QRELS: list[tuple[str, str, int]] = [
    ("q:1", "<dbpedia:Oceanic_Airlines>", 2),
    ("q:1", "12345", 0),
    ("Q/2", "59f11d5004ed84ad_chunk_0", 1),
    ("3", "a/b:c", 2),
    ("3", "plain_doc", 1),
    ("ünï", "12345", 3),
    ("only-zero", "Zürich_Ω", 0),
]
ORIGINAL_DOC_IDS = {str(d[0]) for d in DOCUMENTS}
JUDGED_QUERY_IDS = {"q:1", "Q/2", "3", "ünï"}  # the ones with a gain > 0


def _jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def write_beir(
    root: Path,
    documents: Sequence[tuple[Any, str, str]] = DOCUMENTS,
    queries: Sequence[tuple[str, str]] = QUERIES,
    qrels: Sequence[tuple[str, str, int]] = QRELS,
    header: bool = True,
    split: str = "test",
) -> Path:
    (root / "qrels").mkdir(parents=True)
    _jsonl(
        root / "corpus.jsonl", ({"_id": i, "title": t, "text": x, "metadata": {}} for i, t, x in documents)
    )
    _jsonl(root / "queries.jsonl", ({"_id": i, "text": t} for i, t in queries))
    rows = "".join(f"{q}\t{d}\t{g}\n" for q, d, g in qrels)
    (root / "qrels" / f"{split}.tsv").write_text((QRELS_HEADER if header else "") + rows, encoding="utf-8")
    return root


def tenant_as_beir(tenant: Path, root: Path) -> Path:
    """The tenant domain's semantic entities and tests as a BEIR set (primaries gain 2,
    secondaries gain 1), ids written in upper case so that every one is mapped."""
    kb = load_input(tenant / "kb.yaml")
    bank = load_input(tenant / "banks" / "semantic" / "tenant_questions.json")
    documents = [
        (e["entity_id"].upper(), e["title"], e["content"])
        for e in kb["entities"]
        if e["load_mode"] == "SEMANTIC"
    ]
    queries = [(f"{t['test_id']}:q", t["prompt"]) for t in bank["tests"]]
    qrels = [
        (f"{t['test_id']}:q", e.upper(), gain)
        for t in bank["tests"]
        for key, gain in (("expected_primary", 2), ("expected_secondary", 1))
        for e in t.get(key, [])
    ]
    return write_beir(root, documents, queries, qrels, header=False)


# Nine topics, two passages each (the second the less relevant), and a question on each.
TOPICS: list[tuple[str, str, str, str]] = [
    (
        "bees",
        "Honey bees dance to tell the hive where flowers are.",
        "A bee colony has one queen, thousands of workers and a few drones.",
        "how do honey bees tell each other where the flowers are",
    ),
    (
        "glaciers",
        "Glaciers carve U-shaped valleys as the ice grinds over rock.",
        "Glacial ice forms from snow compressed over many winters.",
        "how do glaciers shape valleys",
    ),
    (
        "violin",
        "A violin's sound comes from the bow making the strings vibrate.",
        "Violins are made of spruce and maple and have four strings.",
        "how does a violin make its sound",
    ),
    (
        "tax",
        "A value added tax is charged at each step of production and sale.",
        "Income tax is levied on wages, salaries and other earnings.",
        "what is a value added tax",
    ),
    (
        "orbit",
        "Satellites stay in orbit because their speed balances the pull of gravity.",
        "A geostationary orbit keeps a satellite above one point of the equator.",
        "why do satellites stay in orbit",
    ),
    (
        "bread",
        "Yeast ferments sugar into carbon dioxide, which makes bread dough rise.",
        "Kneading develops gluten, giving bread its chewy structure.",
        "what makes bread dough rise",
    ),
    (
        "vaccines",
        "Vaccines train the immune system to recognise a germ before an infection.",
        "Some vaccines need a booster dose to keep immunity strong.",
        "how do vaccines protect against disease",
    ),
    (
        "chess",
        "In chess, castling moves the king two squares towards a rook.",
        "A chess pawn that reaches the last rank is promoted.",
        "what is castling in chess",
    ),
    (
        "rainbows",
        "Rainbows appear when sunlight is refracted and reflected in raindrops.",
        "A double rainbow has its second arc with the colours reversed.",
        "why do rainbows appear after rain",
    ),
]
# The last three questions are judged against another topic's first passage only, which the
# retriever has no reason to rank high: those tests select nothing relevant.
MISJUDGED = {"chess": "bees", "rainbows": "tax", "vaccines": "tax"}


def all_or_nothing_beir(root: Path) -> Path:
    """A graded BEIR set of the issue's adversarial shape: most queries judged against passages the
    retriever finds first (gains 2 and 1), a third judged against passages it has no reason to find."""
    documents = [(f"{t}/{n}", "", text) for t, *texts, _ in TOPICS for n, text in enumerate(texts, 1)]
    queries = [(f"q-{t}", question) for t, _, _, question in TOPICS]
    qrels = [
        (f"q-{t}", f"{MISJUDGED[t]}/1", 2) if t in MISJUDGED else (f"q-{t}", f"{t}/{n}", 3 - n)
        for t, *_ in TOPICS
        for n in ((1,) if t in MISJUDGED else (1, 2))
    ]
    return write_beir(root, documents, queries, qrels)

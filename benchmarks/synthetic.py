"""A synthetic KB and semantic bank of any size, for the scale benchmarks.

Seeded and domain-free: entity texts are drawn from a plain English word list, each entity with a
few words of its own so every test has one right answer. Entities are written one file each, as a
team's KB directory would be; the bank is one JSON file laid out like the sample's banks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

_TEXT = """
account action address advice agreement amount answer area balance bill board budget
call card care case change charge check choice claim client code contact contract
cost county credit date deadline decision delay deposit detail document duty email
energy entry event evidence fee file form fund goal group guide health help history
home hour income issue item job key language law letter level limit list loan meeting
member message method money month need note notice number offer office option order
owner page part party payment period permit person phone plan point policy price
problem process program proof property question rate reason receipt record refund
rent report request result review right risk rule safety schedule school service
share sign site size source staff start statement status step store student support
system task tax team term test time tool total training transfer trip type unit
update user value vehicle visit water week work year access approve arrange book
cancel collect confirm cover deliver explain fill follow keep leave manage move open
pay prepare protect provide reach recover reduce register remove renew repair replace
return save send settle share sort submit switch track transfer wait early late local
monthly online private public quick regular safe simple urgent weekly written
"""
_WORDS = _TEXT.split()


def sample_sentence(rng: random.Random, length: int) -> str:
    """`length` random words of the list, as one sentence."""
    return _sentence(rng, [], length)


def _sentence(rng: random.Random, extra: list[str], length: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(length)] + extra
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def write_corpus(root: Path, entities: int, tests: int, seed: int = 7) -> tuple[Path, Path]:
    """Write `root/kb` (manifest + one YAML file per entity) and `root/banks` (a semantic bank of
    `tests` tests, each asking about one entity in its own words); return both paths."""
    rng = random.Random(seed)
    kb, banks = root / "kb", root / "banks"
    (kb / "entities").mkdir(parents=True)
    (banks / "semantic").mkdir(parents=True)
    (kb / "manifest.yaml").write_text(f"kb_version: synthetic-{entities}\n", encoding="utf-8")
    marks: list[list[str]] = []
    for n in range(entities):
        own = [f"{rng.choice(_WORDS)}{n}", rng.choice(_WORDS), rng.choice(_WORDS)]
        marks.append(own)
        body = " ".join(_sentence(rng, own if k == 0 else [], rng.randint(10, 18)) for k in range(6))
        entity = {
            "entity_id": f"item_{n:05d}",
            "entity_type": "KNOWLEDGE",
            "load_mode": "SEMANTIC",
            "title": " ".join(own[:2]).capitalize(),
            "summary": _sentence(rng, own, 8),
            "topics": [f"topic_{n % 20}"],
            "content": body,
        }
        (kb / "entities" / f"item_{n:05d}.yaml").write_text(
            yaml.safe_dump(entity, sort_keys=False, width=100), encoding="utf-8"
        )
    bank = {
        "bank_type": "SEMANTIC",
        "version": "1.0",
        "tests": [
            {
                "test_id": f"S-{t:05d}",
                "category": "general",
                "topics": [f"topic_{(t % entities) % 20}"],
                "prompt": _sentence(rng, marks[t % entities][:2], 6),
                "expected_primary": [f"item_{t % entities:05d}"],
            }
            for t in range(tests)
        ],
    }
    (banks / "semantic" / "bank.json").write_text(json.dumps(bank), encoding="utf-8")
    (banks / "banks.yaml").write_text("semantic: semantic/bank.json\n", encoding="utf-8")
    return kb, banks

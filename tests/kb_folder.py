"""The tenant domain's single-file KB as a KB folder (manifest.yaml + one file per entity), as a
team may keep it: for tests of what only a folder has (entity files, links, stray files)."""

from __future__ import annotations

from pathlib import Path

import yaml


def kb_as_folder(tenant: Path) -> Path:
    data = yaml.safe_load((tenant / "kb.yaml").read_text())
    folder = tenant / "kb"
    (folder / "entities").mkdir(parents=True)
    for entity in data.pop("entities"):
        (folder / "entities" / f"{entity['entity_id']}.yaml").write_text(yaml.safe_dump(entity))
    (folder / "manifest.yaml").write_text(yaml.safe_dump(data))
    return folder

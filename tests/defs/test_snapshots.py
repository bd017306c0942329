from __future__ import annotations

from datetime import UTC, datetime

from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.scoring.run_document import read_document
from eval_pipeline.defs.execution import run_all
from tests.defs.conftest import Env
from tests.defs.observations import observed_on

PAST = "2026-11-20"
MODEL = "local-minilm"


def _observed_on(env: Env, when: datetime) -> str:
    return observed_on(env.instance, env.root / "storage" / "snapshots", env.kb, env.banks, when)


def _kb_version(env: Env, date: str) -> tuple[str, str | None]:
    doc = read_document(env.results / MODEL / date / "results.json")
    return doc.provenance.kb_version, doc.provenance.inputs_snapshot


def test_a_past_date_evaluates_the_kb_snapshot_stored_for_it(env: Env) -> None:
    seen_then = _observed_on(env, datetime(2026, 11, 20, 9, tzinfo=UTC))
    # The next morning the KB was edited and observed again.
    env.kb.write_text(
        env.kb.read_text().replace("kb_version: tenant-fixture-1", "kb_version: tenant-fixture-2")
    )
    seen_later = _observed_on(env, datetime(2026, 11, 21, 8, tzinfo=UTC))
    assert seen_later != seen_then

    run_all(PAST, [MODEL], env.resources(), env.instance)
    version, snapshot = _kb_version(env, PAST)
    assert version == "tenant-fixture-1"  # what the system saw that day, not today's files
    assert (
        snapshot is not None
        and snapshot.startswith(seen_then[:12])
        and "observation at 2026-11-20T09" in snapshot
    )

    run_all("2026-11-21", [MODEL], env.resources(), env.instance)
    assert _kb_version(env, "2026-11-21")[0] == "tenant-fixture-2"
    run_all(today_utc(), [MODEL], env.resources(), env.instance)
    version, snapshot = _kb_version(env, today_utc())
    assert version == "tenant-fixture-2" and snapshot is not None and "current files" in snapshot


def test_a_date_before_any_observation_uses_the_current_files_and_says_so(env: Env) -> None:
    _observed_on(env, datetime(2026, 11, 21, 8, tzinfo=UTC))
    env.kb.write_text(
        env.kb.read_text().replace("kb_version: tenant-fixture-1", "kb_version: tenant-fixture-3")
    )
    run_all(PAST, [MODEL], env.resources(), env.instance)
    version, snapshot = _kb_version(env, PAST)
    assert version == "tenant-fixture-3" and snapshot is not None and "current files" in snapshot


def test_observations_of_another_kb_are_never_used(env: Env) -> None:
    _observed_on(env, datetime(2026, 11, 20, 9, tzinfo=UTC))
    other = env.root / "other_kb.yaml"
    other.write_text(env.kb.read_text().replace("kb_version: tenant-fixture-1", "kb_version: other-kb"))
    env.kb = other
    run_all(PAST, [MODEL], env.resources(), env.instance)
    version, snapshot = _kb_version(env, PAST)
    assert version == "other-kb" and snapshot is not None and "current files" in snapshot

"""Errored tests are summarised by cause: one line per reason, commonest first."""

from __future__ import annotations

from eval_pipeline.core.report.markdown import MAX_ERROR_REASONS, error_reasons
from tests.run_docs import sem


def test_errored_tests_are_grouped_by_reason_commonest_first() -> None:
    results = [
        sem("ok-1", ["a", "b"]),
        *(sem(f"down-{i}", [], error="service down: http://svc/x") for i in range(3)),
        sem("idx-1", [], error="indexing the KB failed: HTTP 500 after 2 attempts"),
    ]
    assert error_reasons(results) == [
        "ERRORED 3 test(s): service down: http://svc/x",
        "ERRORED 1 test(s): indexing the KB failed: HTTP 500 after 2 attempts",
    ]


def test_rare_reasons_beyond_the_shown_ones_are_counted_together() -> None:
    results = [sem(f"t{i}", [], error=f"reason {i}") for i in range(MAX_ERROR_REASONS + 2)]
    lines = error_reasons(results)
    assert len(lines) == MAX_ERROR_REASONS + 1
    assert lines[-1] == "ERRORED 2 more test(s) for other reasons"
    assert error_reasons([sem("fine", ["a", "b"])]) == []

"""`diff --format markdown`: the diff as a pull-request comment of at most `MAX_LINES` lines.

The verdict and what fails it come first (new critical failures on the third line), then a
summary; each kind of change sits in a collapsed `<details>` block, the blocks sharing what is
left of the budget, so hundreds of regressions still name the first of each kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from eval_pipeline.core.diff.model import DeltaKind, PerTestDelta, RunDiff
from eval_pipeline.core.markdown_text import code, text
from eval_pipeline.core.report.diff_text import (
    DETAILED,
    GRADED_STATISTICS,
    detail_lines,
    dropped_line,
    headline,
    health_line,
    implementation_lines,
    kind_title,
    sections,
    span_lines,
)
from eval_pipeline.core.verdicts.regression_gate import DiffGate
from eval_pipeline.core.verdicts.run_gate import GateStatus, Verdict

MAX_LINES = 60
MAX_CHARS = 300  # a line longer than this is cut: a reason can list hundreds of ids
CRITICAL_NAMED = 5  # critical failures named on the headline line
_BLOCK_OVERHEAD = 3  # "<details><summary>", the blank line markdown needs, "</details>"
_ICON = {GateStatus.PASSED: "✅", GateStatus.FAILED: "❌", GateStatus.UNEVALUABLE: "⚠️"}


def _line(prefix: str, data: str, render: Callable[[str, int], str] = text) -> str:
    """`prefix` (markdown) then `data` (text from data) rendered inert, within MAX_CHARS."""
    return prefix + render(data, MAX_CHARS - len(prefix))


def _critical_line(diff: RunDiff) -> list[str]:
    critical = diff.of_kind(DeltaKind.CRITICAL)
    if not critical:
        return []
    named = "; ".join(headline(d) for d in critical[:CRITICAL_NAMED])
    more = f"; +{len(critical) - CRITICAL_NAMED} more" if len(critical) > CRITICAL_NAMED else ""
    return [_line(f"- 🚨 **{len(critical)} new critical failure(s)**: ", named + more, code)]


def _job_line(diff: RunDiff, job: Verdict) -> str:
    """The job's verdict: ✅ only when the run, its release gate and the diff gate all passed."""
    sides = f"{diff.base.label} → {diff.head.label}"
    if job.passed:
        return _line("## ✅ Retrieval check: PASSED (release gate, coverage, regressions) — ", sides)
    return _line(
        f"## ❌ Retrieval check: {job.status.value.upper()} — ", f"{'; '.join(job.reasons)} — {sides}"
    )


def _verdict(diff: RunDiff, gate: DiffGate, job: Verdict | None) -> list[str]:
    mode = " (strict)" if gate.strict else ""
    title = f"{_ICON[gate.status]} Retrieval diff{mode}: {gate.status.value.upper()} — "
    sides = f"{diff.base.label} → {diff.head.label}"
    first = (
        [_line(f"## {title}", sides)]
        if job is None
        else [_job_line(diff, job), "", f"**{_line(title, sides)}**"]
    )
    lines = [*first, "", *_critical_line(diff)]
    if gate.reasons or gate.notes:
        lines += ["", f"**The diff gate{mode}**:"] if lines[-1] else [f"**The diff gate{mode}**:"]
    lines += [_line("- ", r) for r in gate.reasons]
    lines += [_line("- note: ", n) for n in gate.notes]
    return [*lines, ""]


def _summary(diff: RunDiff) -> list[str]:
    counts = ", ".join(f"{diff.counts.get(k, 0)} {kind_title(k)}" for k in (*DETAILED, DeltaKind.UNCHANGED))
    lines = [
        f"**{text(health_line(diff))}** · pass: score ≥ {diff.pass_threshold} · {counts}",
        _line("**statistics (semantic)**: ", diff.statistics.verdict),
    ]
    if diff.graded_statistics:
        lines.append(_line(f"**{GRADED_STATISTICS}**: ", diff.graded_statistics.verdict))
    spans = [*implementation_lines(diff), *diff.warnings, *span_lines(diff)]
    shown = [_line("- ⚠️ ", s) for s in spans[:3]]
    return [*lines, *shown, *(["- ⚠️ …"] if len(spans) > 3 else []), ""]


def _item(d: PerTestDelta) -> str:
    line = _line("- ", headline(d), code)
    details = " · ".join(detail_lines(d))
    return _line(f"{line} — ", details) if details and len(line) < MAX_CHARS - 5 else line


def _shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Item lines per block: equal shares of `budget`, what a small block leaves to the others."""
    shares = [0] * len(sizes)
    left, open_blocks = budget, [i for i, n in enumerate(sizes) if n]
    while open_blocks and left > 0:
        each = max(left // len(open_blocks), 1)
        for i in list(open_blocks):
            give = min(each, sizes[i] - shares[i], left)
            shares[i] += give
            left -= give
            if shares[i] == sizes[i]:
                open_blocks.remove(i)
    return shares


def _kinds(diff: RunDiff) -> list[tuple[str, list[str]]]:
    """Each kind of change with its items, most telling first (`sections`)."""
    return [
        (
            f"{title.capitalize()} ({len(deltas)})",
            [_line("- ", dropped_line(d)) if dropped else _item(d) for d in deltas],
        )
        for title, deltas, dropped in sections(diff)
    ]


def _blocks(diff: RunDiff, budget: int) -> list[str]:
    blocks = _kinds(diff)
    while blocks and budget < (_BLOCK_OVERHEAD + 1) * len(blocks):
        blocks.pop()  # the least telling kind first (the gate's reasons above still name removals)
    # A block that cannot show all its tests spends one line on how many more there are.
    items = max(budget - _BLOCK_OVERHEAD * len(blocks), 0)
    sizes = [len(block) for _, block in blocks]
    shares = _shares(sizes, items)
    if any(s < n for s, n in zip(shares, sizes, strict=True)):
        shares = _shares(sizes, max(items - len(blocks), 0))
    lines: list[str] = []
    for (title, block), share in zip(blocks, shares, strict=True):
        lines += [f"<details><summary>{title}</summary>", ""]
        lines += block[:share]
        if share < len(block):
            lines.append(f"- … {len(block) - share} more: `eval-pipeline diff` lists every test")
        lines.append("</details>")
    return lines


def render_diff_comment(diff: RunDiff, gate: DiffGate, job: Verdict | None = None) -> str:
    """The comment; with `job`, its first line is the CI job's verdict and the diff's follows."""
    head = [*_verdict(diff, gate, job), *_summary(diff)]
    if len(head) > MAX_LINES:  # only a diff with very many warnings and reasons gets here
        head = [*head[: MAX_LINES - 1], "- …"]
    lines = head + _blocks(diff, MAX_LINES - len(head))
    return "\n".join(lines[:MAX_LINES]).rstrip() + "\n"

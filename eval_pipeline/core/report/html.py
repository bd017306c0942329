"""The HTML report: one self-contained file (inline CSS, SVG and script; no URL of any kind) that a
lead can open from disk, attach to a pull request or publish, and read offline.

Rendered with Jinja2 with autoescaping on: test ids, prompts and reasons are data and never markup;
their control characters are shown escaped (`\\x1b`), so the file holds no raw escape sequence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jinja2
import markupsafe

from eval_pipeline.core.control_chars import visible
from eval_pipeline.core.diff.baseline import RegressionDiff
from eval_pipeline.core.report.html_view import HtmlReport, build_report
from eval_pipeline.core.scoring.run_document import RunDocument


def _shown(value: object) -> object:
    # Markup is a macro's output, rendered (and shown) already.
    return visible(value) if isinstance(value, str) and not isinstance(value, markupsafe.Markup) else value


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("eval_pipeline.core.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    finalize=_shown,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render_report(report: HtmlReport) -> str:
    return _ENV.get_template("report.html.j2").render(report=report)


def render_html(
    docs: Sequence[RunDocument], comparisons: Mapping[str, RegressionDiff], notes: Sequence[str] = ()
) -> str:
    """The report of `docs` (see html_view.build_report) as one HTML document."""
    return render_report(build_report(docs, comparisons, notes))

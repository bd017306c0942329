"""The README is the front door and docs/ holds the rest.

The README stays at most 120 lines with a quick start of exactly `make run` and `make test`; every
relative link in the README and the docs pages resolves (file and heading); and the MkDocs site
builds with --strict, which is what fails on a broken link, anchor or a page missing from the nav.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]

FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)
URL_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:")


def _prose(text: str) -> str:
    # Link syntax inside code is shown as written, not followed.
    return CODE_SPAN.sub("", FENCED.sub("", text))


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (Python-Markdown's toc slugs of the heading text)."""
    text = FENCED.sub("", page.read_text(encoding="utf-8"))
    return {slugify(heading.replace("`", ""), "-") for heading in HEADING.findall(text)}


def broken_links(page: Path) -> list[str]:
    problems = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if URL_SCHEME.match(target):
            continue  # a web address: no test reaches the internet
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_file():
            problems.append(f"{page.name}: {target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
            problems.append(f"{page.name}: {target}: no heading #{fragment} in {dest.name}")
    return problems


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def test_readme_is_at_most_120_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 120, f"README.md has {len(lines)} lines; move the rest into docs/"


def test_quick_start_is_exactly_make_run_and_make_test() -> None:
    quick_start = _section(README.read_text(encoding="utf-8"), "Quick start")
    blocks = [block.splitlines()[1:-1] for block in FENCED.findall(quick_start)]
    assert blocks == [["make run", "make test"]]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_readme_links_every_docs_page() -> None:
    linked = {Path(target.partition("#")[0]) for target in LINK.findall(_prose(README.read_text()))}
    missing = [page.name for page in DOCS.glob("*.md") if page.relative_to(REPO) not in linked]
    assert missing == [], f"README links no page for {missing}"


def test_a_missing_file_or_heading_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Real heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#real-heading) [gone](missing.md) [no anchor](other.md#imagined)\n"
        "`[in code](nowhere.md)` and [web](https://example.org/x)\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "page.md: missing.md: no such file",
        "page.md: other.md#imagined: no heading #imagined in other.md",
    ]


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "--site-dir"]
    return subprocess.run([*command, str(site)], capture_output=True, text=True, check=False)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    result = _mkdocs_build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "performance" / "index.html").is_file()


def test_a_broken_anchor_fails_the_strict_build(tmp_path: Path) -> None:
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](cli.md#no-such-heading)\n", encoding="utf-8")
    result = _mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 1
    assert "cli.md#no-such-heading" in result.stderr


LAYOUT_ROW = re.compile(r"^\| `([a-z_/]+?)/` [^|]*\|(.*)\|$", re.MULTILINE)


def test_the_layout_page_names_only_modules_that_exist() -> None:
    """Every module the layout page names in a package's row is in that package (a merged or
    renamed module leaves no stale name behind)."""
    rows = LAYOUT_ROW.findall((DOCS / "layout.md").read_text(encoding="utf-8"))
    assert len(rows) >= 10
    missing = []
    for package, holds in rows:
        folder = REPO / "eval_pipeline" / package
        present = {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.rglob("*") if p.is_dir()}
        missing += [f"{package}/{name}" for name in re.findall(r"`([a-z_]+)`", holds) if name not in present]
    assert missing == []

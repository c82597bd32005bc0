"""Every relative link in the README, the CHANGELOG and docs/ names a file that exists, and an anchor
that one of its headings makes (as GitHub spells heading anchors)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~)")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks (a link in a code sample is not a link)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered (-1, -2, ...)."""
    found: set[str] = set()
    for line in _prose(path.read_text()):
        heading = _HEADING.match(line)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def relative_links(path: Path) -> list[str]:
    links = []
    for line in _prose(path.read_text()):
        for target in _LINK.findall(line):
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                links.append(target)
    return links


def test_every_relative_link_resolves() -> None:
    # Given the README, the CHANGELOG and every page of docs/
    names = {p.relative_to(ROOT).as_posix() for p in DOCUMENTS}
    assert {"README.md", "CHANGELOG.md", "docs/api.md", "docs/architecture.md"} <= names
    # When each relative link is followed
    broken = []
    for document in DOCUMENTS:
        for target in relative_links(document):
            file_part, _, anchor = target.partition("#")
            linked = (document.parent / file_part).resolve() if file_part else document
            where = f"{document.relative_to(ROOT).as_posix()}: {target}"
            if not linked.exists():
                broken.append(f"{where}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{where}: no heading makes #{anchor}")
    # Then each names a file there is, and a heading in it
    assert broken == [], broken


def test_a_heading_anchor_is_spelt_as_github_spells_it(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# The `lambda` task\n## 1. Outcomes: a job's runs\n## POST /jobs/batch\n## A — B\n## A — B\n"
    )
    assert anchors(doc) == {"the-lambda-task", "1-outcomes-a-jobs-runs", "post-jobsbatch", "a--b", "a--b-1"}

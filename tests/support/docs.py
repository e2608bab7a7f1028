"""The documentation's text, wherever a passage lives: the README and the site's pages
(docs/, mkdocs.yml). Tests that check what the docs say read it through here, so a passage
can move between pages without a test silently reading less."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The README and every page of the site."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def text(*names: str) -> str:
    """The named pages (paths under docs/, or README.md) joined; all of them without names."""
    paths = [ROOT / n if n == "README.md" else DOCS / n for n in names] if names else pages()
    return "\n".join(path.read_text() for path in paths)


def section(name: str, heading: str) -> str:
    """One page's section: from its heading line to the next heading of the same level."""
    page = text(name)
    level = heading.split(" ", 1)[0]
    start = page.index(f"\n{heading}\n") + 1
    end = page.find(f"\n{level} ", start + len(heading))
    return page[start : end if end != -1 else len(page)]

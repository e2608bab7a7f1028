"""What the docs claim about the code holds: docs/architecture.md's list of files over 450
lines, the classes, functions and attributes it names, and every link and cited section
title across the README, the site's pages and the code's comments (mkdocs --strict checks
links between pages; these also cover the README, which the site does not build, and
citations written as text: `docs/x.md, "Title"`)."""

from __future__ import annotations

import ast
import itertools
import re
import unicodedata
from functools import cache
from pathlib import Path

import botocore.loaders

from tests.support import docs

PACKAGE = docs.ROOT / "sqsdelay"
LIMIT = 450
# Names of other projects that architecture.md names for comparison or as input shapes.
OTHERS = {
    "Auth.auth_flow": "httpx",
    "SQSRecord": "Powertools' batch utility",
    "spark.sql": "PySpark",
}
SERVICES = ("sqs", "lambda", "scheduler", "dynamodb", "cloudwatch")


@cache
def aws_operations() -> set[str]:
    """The API names of the services sqsdelay calls, as botocore's models have them."""
    loader = botocore.loaders.create_loader()
    return {
        op
        for service in SERVICES
        for op in loader.load_service_model(service, "service-2")["operations"]
    }


@cache
def defined() -> dict[str, set[str]]:
    """Every name sqsdelay defines (classes, functions, module and class attributes,
    `self.x` attributes), with the names defined inside it; and the string literals it
    uses (AWS's API and attribute names, metrics), which count as names it knows."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        found.setdefault(path.stem, set()).update(top_level(tree.body))
        for name in top_level(tree.body):
            found.setdefault(name, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                members = top_level(node.body) | {
                    t.attr
                    for n in ast.walk(node)
                    if isinstance(n, ast.Assign | ast.AnnAssign)
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                    if isinstance(t, ast.Attribute)
                }
                found.setdefault(node.name, set()).update(members)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.setdefault(node.name, set())
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.setdefault(node.value, set())
    return found


def top_level(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_files_over_450_lines_are_the_ones_it_names() -> None:
    text = docs.text("architecture.md")
    claim = re.search(r"^(\w+) files pass 450 lines\b.*?(?=\n\n)", text, re.M | re.S)
    assert claim, "architecture.md no longer says which files pass 450 lines"
    named = set(re.findall(r"`([\w/]+\.py)`", claim.group(0))) - {"tests/test_docs_claims.py"}
    long = {
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if len(p.read_text().splitlines()) > LIMIT
    }
    assert named == long, f"named but not over {LIMIT}: {named - long}; over: {long - named}"
    words = [
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
    ]
    assert claim.group(1).lower() == words[len(long) - 1], claim.group(1)


def test_the_names_it_gives_exist() -> None:
    """Each backticked code name (`Name`, `Name.member`, `module.function()`) is one that
    sqsdelay defines or uses, and a member is defined in what it is named after."""
    text = docs.text("architecture.md")
    names = set(re.findall(r"`([A-Za-z_]\w*(?:\.\w+)*)(?:\(\))?`", text))
    known = defined()
    wrong = []
    for name in sorted(names):
        parts = [p for p in name.split(".") if p not in {"sqsdelay", "cost", "core", "aws"}]
        if name in OTHERS or name in known or name in aws_operations():
            continue  # a name sqsdelay defines or writes (an attribute, an event), or AWS's
        if name.startswith("SQSDELAY_") or name.endswith((".py", ".toml")):
            continue  # settings and files: tests/integration/test_settings_and_logs.py, the map
        if not parts or (len(parts) == 1 and name.islower()):
            continue  # a folder or a tests/support module, which the map test covers
        if parts[0] not in known or any(
            b not in known.get(a, set()) for a, b in itertools.pairwise(parts)
        ):
            wrong.append(name)
    assert not wrong, f"docs/architecture.md names what sqsdelay does not define: {wrong}"


def slug(title: str) -> str:
    """Python-Markdown's toc slug, as mkdocs makes a heading's anchor."""
    value = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def headings(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)]


def test_every_link_and_anchor_in_the_readme_and_the_pages_exists() -> None:
    broken = []
    for page in docs.pages():
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"\w+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in map(slug, headings(linked)):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_every_section_cited_by_its_title_exists() -> None:
    """`docs/x.md, "Title"` in the docs and in the code's comments names a heading of x.md."""
    sources = [*docs.pages(), *PACKAGE.rglob("*.py"), *(docs.ROOT / "scripts").glob("*.py")]
    cited = re.compile(r"docs/([\w-]+\.md)[,:]? \(?\"([^\"]+)\"")
    missing = []
    for source in sources:
        for page, title in cited.findall(source.read_text()):
            target = docs.DOCS / page
            if not target.exists() or not any(h.startswith(title) for h in headings(target)):
                missing.append(f"{source.relative_to(docs.ROOT)}: {page}, {title!r}")
    assert not missing, missing

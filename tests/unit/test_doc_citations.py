"""Every citation of DESIGN.md names a section it has, and no doc cites a file we lack."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"DESIGN\.md,?\s+(\d+(?:\.\d+)?)((?:\s*(?:,|and|-)\s*\d+(?:\.\d+)?)*)")


def sources() -> list[Path]:
    files = [*ROOT.glob("garmexport/**/*.py"), *ROOT.glob("tests/**/*.py"),
             *ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("mesos/*.md"),
             *ROOT.glob("config/*")]
    return [f for f in files if f.is_file() and "_pb" not in f.parts]


def sections() -> set[str]:
    text = (ROOT / "DESIGN.md").read_text()
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, re.M))


def test_design_sections_are_numbered() -> None:
    assert {"1", "3", "4.1", "4.5", "4.11", "7"} <= sections()


def test_every_design_citation_names_an_existing_section() -> None:
    have = sections()
    wrong = []
    for path in sources():
        for m in CITATION.finditer(path.read_text()):
            cited = [m[1], *re.findall(r"\d+(?:\.\d+)?", m[2])]
            wrong += [f"{path.relative_to(ROOT)}: {n}" for n in cited if n not in have]
    assert not wrong, wrong


def test_no_citation_of_a_document_outside_the_repository() -> None:
    outside = re.compile(r"design\.md \d|shared/wire-format|shared/design")
    found = [str(p.relative_to(ROOT)) for p in sources()
             if p.name != "test_doc_citations.py" and outside.search(p.read_text())]
    assert not found, found

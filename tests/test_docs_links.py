"""The README and docs/ link to each other by file and section: every relative link
resolves to a file of the repository, and every ``#anchor`` to a heading of its target
(as GitHub makes anchors of headings). The README's first screen is the quick start."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pytest_opprof

ROOT = Path(pytest_opprof.__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a file's headings: lower case, punctuation but ``-`` and
    ``_`` dropped, spaces to ``-``; a repeated one gets ``-1``, ``-2``, ..."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"^```.*?^```", "", markdown,
                                                       flags=re.S | re.M), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


def links(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_anchor_resolves(doc):
    broken = []
    for target in links(doc):
        file, _, anchor = target.partition("#")
        where = (doc.parent / file).resolve() if file else doc
        if not where.exists():
            broken.append(target)
        elif anchor and where.suffix == ".md" and \
                anchor not in anchors(where.read_text(encoding="utf-8")):
            broken.append(target)
    assert broken == []


def test_the_anchor_rule_is_githubs():
    assert anchors("## Instruction counts on the CPU: `--opprof-measure=instructions`\n") == \
        {"instruction-counts-on-the-cpu---opprof-measureinstructions"}
    assert anchors("## The fixture and `pytest_opprof.op`\n## Options\n## Options\n") == \
        {"the-fixture-and-pytest_opprofop", "options", "options-1"}


def test_the_readme_opens_with_the_commands_then_the_quick_start():
    """The first block is the three commands (each true: .ci/run and the tests run
    them); the first heading after it is the quick start, whose steps install, take a
    baseline, gate, show a failure and pick a measure."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    commands = [line.strip() for line in lines[2:5]]
    assert commands[0].startswith("pip install -e '.[test]' && pytest example_suite ")
    assert commands[1].startswith("pip install -e '.[test]' && pytest -n auto")
    assert commands[2].startswith("pip install -e '.[test]' && pytest -m unit")
    first = next(line for line in lines[5:] if line.strip())
    assert first.startswith("## Quick start")
    quick = "\n".join(lines[5:]).split("\n## ", 2)[1]
    for step in ("Install", "Take a baseline", "Run the gate", "What a failure looks like",
                 "Which measure"):
        assert f"**{step}" in quick or f". {step}" in quick, step
    for words in ("opprof baseline update", "--opprof-update-baseline", "--opprof-strict",
                  "--opprof-strict=25%", "regressed against the baseline", "-p no:benchmark"):
        assert words in quick, words
    assert len(lines) < 260

"""The documentation stays true: every relative link in README.md and docs/*.md reaches a file (and a heading, for an
anchor), docs/cli.md lists exactly the options ``ctxrag COMMAND --help`` has, with their defaults, and the CTXRAG_*
variables as the settings model has them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CLI_PAGE = REPO / "docs" / "cli.md"
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
OPTION = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fence = [], None
    for line in text.splitlines():
        found = FENCE.match(line)
        if found:
            fence = found.group(1)[0] if fence is None else (None if found.group(1)[0] == fence else fence)
            continue
        if fence is None:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped (``-`` and ``_`` kept), spaces to ``-``."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for line in prose_lines(page.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            anchor, n = base, 0
            while anchor in found:  # GitHub numbers repeated headings
                n += 1
                anchor = f"{base}-{n}"
            found.add(anchor)
    return found


def links(page: Path) -> list[str]:
    targets = []
    for line in prose_lines(page.read_text(encoding="utf-8")):
        targets += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return targets


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(REPO)) for page in PAGES])
def test_relative_links_reach_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with that anchor in {file.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


# --- docs/cli.md against the command itself --------------------------------------------------------------------------


def commands() -> dict[str, Any]:
    """``{"index": <command>, "server status": <command>, ...}``: every leaf command of ``ctxrag``."""
    import typer.main

    from ctxrag.cli import app

    found: dict[str, Any] = {}

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(app), [])
    return found


def sections(text: str) -> dict[str, list[str]]:
    """docs/cli.md's ``## ...`` sections: heading text -> its lines (with its ``###`` subsections)."""
    found: dict[str, list[str]] = {}
    current = None
    for line in prose_lines(text):
        heading = re.match(r"^## (.+)$", line)
        if heading:
            current = heading.group(1).strip()
            found[current] = []
        elif current is not None:
            found[current].append(line)
    return found


def option_rows(lines: list[str]) -> dict[str, str]:
    """Each option named in the first cell of a table row -> that row's second cell (its default)."""
    rows = {}
    for line in lines:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2:
            for option in OPTION.findall(cells[0]):
                rows[option] = cells[1]
    return rows


def test_cli_page_lists_every_option_with_its_default() -> None:
    from ctxrag.tasks.retrieval.search import DEFAULT_STRATEGY

    page = sections(CLI_PAGE.read_text(encoding="utf-8"))
    problems = []
    for path, command in commands().items():
        heading = f"ctxrag {path.split()[0]}"
        if heading not in page:
            problems.append(f"no section '## {heading}'")
            continue
        rows = option_rows(page[heading])
        options = {
            name: param
            for param in command.params
            for name in (*param.opts, *param.secondary_opts)
            if name.startswith("-")
        }
        if missing := sorted(set(options) - set(rows)):
            problems.append(f"{heading}: not in its table: {', '.join(missing)}")
        if extra := sorted(set(rows) - set(options)):
            problems.append(f"{heading}: in its table but not in --help: {', '.join(extra)}")
        for name, param in options.items():
            default = param.default
            if name not in rows or default in (None, False, "") or name in param.secondary_opts:
                continue
            if default == DEFAULT_STRATEGY:
                if "(#search-strategies)" not in rows[name]:
                    problems.append(f"{heading} {name}: its default should link to #search-strategies")
            elif str(default) not in rows[name] and (
                not isinstance(default, float) or f"{default:g}" not in rows[name]
            ):
                problems.append(f"{heading} {name}: default {default!r} not in {rows[name]!r}")
    assert not problems, "docs/cli.md: " + "; ".join(problems)


def test_cli_page_names_the_default_strategy_in_one_place() -> None:
    from ctxrag.tasks.retrieval.search import DEFAULT_STRATEGY

    assert CLI_PAGE.read_text(encoding="utf-8").count(f"The default strategy is `{DEFAULT_STRATEGY}`") == 1


def test_cli_page_lists_the_settings_from_the_model_and_no_page_names_another() -> None:
    """docs/cli.md's table of CTXRAG_* variables is the one ``ctxrag.config_command.docs_table`` makes from the
    settings model (every variable documented, with its default and meaning), and no page names a CTXRAG_ variable
    the model does not have (the tests' own, ``CTXRAG_TEST_*``, aside)."""
    from ctxrag.config_command import docs_table
    from ctxrag.storage.settings import variables

    table = docs_table()
    assert table in CLI_PAGE.read_text(encoding="utf-8"), (
        "docs/cli.md's settings table is not the model's; replace the block between its markers with:\n" + table
    )
    known = {each.metadata["variable"] for each in variables()}
    named = {
        name
        for page in PAGES
        for name in re.findall(r"\bCTXRAG_[A-Z][A-Z0-9_]*[A-Z0-9]\b", page.read_text(encoding="utf-8"))
        if not name.startswith("CTXRAG_TEST_")
    }
    assert named <= known, f"named in the docs, not a setting: {sorted(named - known)}"

"""Docs-site pages read as Markdown, so they chunk by heading like any Markdown file.

- Front matter (``---`` YAML at the top of ``.md``/``.mdx``): its ``title`` becomes the page's first heading, as a
  docs site renders it, and its ``description`` the page's description (every chunk's context names it).
- ``.mdx``: ``import``/``export`` statements are dropped, and JSX component tags (``<Tabs>``, ``<Note type="x">``,
  ``</Note>``, ``<Card />``) are removed while the text between them stays. Fenced code is left as written.
- ``.rst``: section titles (a line underlined, and optionally overlined, with one punctuation character) become ATX
  headings, levels in the order the styles first appear, as docutils assigns them.
- ``.adoc``: ``= Title`` / ``== Section`` headings become ATX headings.
- ``.ipynb``: markdown cells as they are, code cells fenced in the notebook's language; outputs are left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import yaml

DOCS_EXTENSIONS: frozenset[str] = frozenset({"mdx", "rst", "adoc", "ipynb"})  # read as Markdown, besides md/markdown
_FENCE = re.compile(r"^\s*(```|~~~)")
_ESM = re.compile(r"^(import|export)\s")
_JSX_TAG = re.compile(r"</?[A-Z][\w.]*(?:\s+(?:[^<>{}]|\{[^{}]*\})*)?/?>")
_RST_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+:.!$%&,;<>?@_|])\1{2,}\s*$")
_ADOC_HEADING = re.compile(r"^(={1,6})\s+(\S.*)$")


@dataclass(frozen=True)
class Page:
    text: str  # Markdown
    description: str = ""


def as_markdown(text: str, extension: str) -> Page:
    """The page as Markdown (see the module docstring); Markdown with no front matter comes back as it is."""
    if extension == "ipynb":
        return Page(_notebook(text))
    if extension == "rst":
        return Page(_rst(text))
    if extension == "adoc":
        return Page(
            "\n".join(
                _ADOC_HEADING.sub(lambda m: "#" * len(m.group(1)) + " " + m.group(2), line) for line in text.split("\n")
            )
        )
    body, meta = _front_matter(text)
    if extension == "mdx":
        body = _mdx_body(body)
    title = str(meta.get("title") or meta.get("sidebar_label") or "").strip()
    if title and not re.match(rf"#\s+{re.escape(title)}\s*$", body.lstrip().split("\n", 1)[0]):
        body = f"# {title}\n\n{body.lstrip()}"
    return Page(body, str(meta.get("description") or "").strip())


def _front_matter(text: str) -> tuple[str, dict[str, object]]:
    """The text after a leading ``---`` YAML block, and the block as a mapping (empty when there is none)."""
    match = re.match(r"---[ \t]*\n(.*?\n)---[ \t]*(?:\n|$)", text, re.DOTALL)
    if not match:
        return text, {}
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return text, {}
    return (text[match.end() :], meta) if isinstance(meta, dict) else (text, {})


def _mdx_body(text: str) -> str:
    """MDX without its ESM statements and component tags, outside fenced code."""
    kept: list[str] = []
    fence: str | None = None
    depth = 0  # open brackets of a multi-line import/export being dropped
    for line in text.split("\n"):
        marker = _FENCE.match(line)
        if fence is None and depth == 0 and _ESM.match(line):
            depth = max(
                0,
                line.count("{")
                + line.count("(")
                + line.count("[")
                - line.count("}")
                - line.count(")")
                - line.count("]"),
            )
            continue
        if depth:
            depth = max(
                0,
                depth
                + line.count("{")
                + line.count("(")
                + line.count("[")
                - line.count("}")
                - line.count(")")
                - line.count("]"),
            )
            continue
        if marker:
            fence = None if fence == marker.group(1) else fence or marker.group(1)
            kept.append(line)
            continue
        if fence is None:
            stripped = _JSX_TAG.sub("", line)
            if stripped.strip() or not line.strip():
                kept.append(stripped.strip() if line.strip() != stripped.strip() else line)
            continue
        kept.append(line)
    return "\n".join(kept)


def _rst(text: str) -> str:
    """reStructuredText with its section titles as ATX headings."""
    lines = text.split("\n")
    styles: list[tuple[str, bool]] = []
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        over = _RST_ADORNMENT.match(line)
        if (
            over
            and index + 2 < len(lines)
            and lines[index + 1].strip()
            and _RST_ADORNMENT.match(lines[index + 2])
            and lines[index + 2].strip()[0] == over.group(1)
        ):  # overline, title, underline
            title, style, index = lines[index + 1].strip(), (over.group(1), True), index + 3
        elif (
            line.strip()
            and not over
            and index + 1 < len(lines)
            and (under := _RST_ADORNMENT.match(lines[index + 1]))
            and len(lines[index + 1].rstrip()) >= len(line.rstrip())
            and not line.startswith((" ", "\t"))
        ):
            title, style, index = line.strip(), (under.group(1), False), index + 2
        else:
            out.append(line)
            index += 1
            continue
        if style not in styles:
            styles.append(style)
        out.append("#" * min(6, styles.index(style) + 1) + " " + title)
    return "\n".join(out)


def _notebook(text: str) -> str:
    """A Jupyter notebook's cells as Markdown: markdown cells, and code cells fenced in its language."""
    try:
        notebook = json.loads(text)
        cells = notebook.get("cells", [])
        language = str((notebook.get("metadata", {}).get("language_info") or {}).get("name") or "python")
    except (ValueError, AttributeError):
        return text
    parts = []
    for cell in cells if isinstance(cells, list) else []:
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        source = "".join(source) if isinstance(source, list) else str(source)
        if not source.strip():
            continue
        parts.append(
            source.strip() if cell.get("cell_type") == "markdown" else f"```{language}\n{source.rstrip()}\n```"
        )
    return "\n\n".join(parts) + "\n"

"""The questions of the suite's mined sets, made from a corpus alone (suite_sets).

- README headings (``build_set``): installed distributions' Markdown READMEs (>= 2,000 characters); a question per
  heading (levels 1-4, >= 3 words, a body of >= 200 characters, unique), renamed ``Section N`` in the file; golden:
  the chunks under that heading path (at most 400, seeded). ctxrag's own README is left out.
- Docs summaries (``summary_questions``): each Claude-written summary asked of the chunks indexed without them.
- Docstrings (``prepare_repository``, CodeSearchNet-style): a package copied without docstrings; the first sentence
  (>= 6 words) of each public definition's docstring asks for the chunk holding its header line (at most 400, seeded).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ctxrag.storage.index_store import StoredIndex
from ctxrag.tasks.load import load_source
from ctxrag.tasks.load.chunking import _HEADING, _fence_after  # the chunker's own heading and fence rules

MIN_DESCRIPTION = 2_000
MIN_WORDS = 3
MIN_BODY = 200
MAX_LEVEL = 4
MAX_QUESTIONS = 400
LEFT_OUT = {"ctxrag"}  # this project: its README changes with it
MARKUP = [
    (re.compile(r"!?\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])"), r"\1"),  # links and images: their text
    (re.compile(r"<[^>]*>"), ""),  # inline HTML (anchors)
    (re.compile(r"`+|\*+|~~|(?<!\w)_+|_+(?!\w)"), ""),  # code spans, emphasis
]


@dataclass(frozen=True)
class Question:
    text: str
    doc: str  # the file, as the index's doc_id
    section: str  # "Section N", the heading's text in the written file


def normalized(name: str) -> str:
    """PEP 503: ``Foo_Bar.baz`` -> ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def readmes() -> list[tuple[str, str, str]]:
    """(normalized name, version, Markdown description) of the installed distributions that qualify, sorted by name."""
    found: dict[str, tuple[str, str, str]] = {}
    for dist in sorted(
        importlib.metadata.distributions(), key=lambda d: (normalized(d.metadata["Name"] or ""), d.version)
    ):
        meta = dist.metadata
        text = meta.get_payload() or meta.get("Description") or ""  # type: ignore[attr-defined]
        kind = (meta.get("Description-Content-Type") or "").strip().lower()
        name = normalized(meta["Name"] or "")
        if (
            name
            and name not in found
            and name not in LEFT_OUT
            and kind.startswith("text/markdown")
            and len(text) >= MIN_DESCRIPTION
        ):
            found[name] = (name, dist.version, text)
    return sorted(found.values())


def plain(heading: str) -> str:
    """A heading's text without links, inline HTML, code spans and emphasis, whitespace collapsed."""
    for pattern, replacement in MARKUP:
        heading = pattern.sub(replacement, heading)
    return " ".join(heading.split())


def headings(lines: list[str]) -> list[tuple[int, str, int]]:
    """(line number, plain text, body characters) of each ATX heading of level <= MAX_LEVEL outside fences; the
    body runs to the next heading of any level."""
    found: list[tuple[int, str]] = []
    bounds: list[int] = []
    fence: str | None = None
    for number, line in enumerate(lines):
        match = _HEADING.match(line.rstrip()) if fence is None else None
        if match:
            bounds.append(number)
            if len(match.group(1)) <= MAX_LEVEL:
                found.append((number, plain(match.group(2) or "")))
        fence = _fence_after(line, fence)
    bounds.append(len(lines))
    ends = [next(bound for bound in bounds if bound > number) for number, _ in found]
    return [(number, text, len("".join(lines[number + 1 : end]).strip())) for (number, text), end in zip(found, ends)]


def build_set(docs: list[tuple[str, str, str]], folder: Path) -> list[Question]:
    """Write each README to ``folder`` with its question headings neutralized; return the questions."""
    parsed = {name: text.splitlines(keepends=True) for name, _, text in docs}
    found = {name: headings(lines) for name, lines in parsed.items()}
    seen = Counter(text.casefold() for entries in found.values() for _, text, _ in entries)
    questions: list[Question] = []
    for name, lines in parsed.items():
        number = 0
        for line_number, text, body in found[name]:
            if (
                len([word for word in text.split() if re.search(r"\w", word)]) < MIN_WORDS
                or body < MIN_BODY
                or seen[text.casefold()] > 1
            ):
                continue
            number += 1
            marks = re.match(r"\s*#+", lines[line_number]).group(0)  # type: ignore[union-attr]
            lines[line_number] = f"{marks} Section {number}\n"
            questions.append(Question(text, f"{name}.md", f"Section {number}"))
        (folder / f"{name}.md").write_text("".join(lines), encoding="utf-8")
    if len(questions) > MAX_QUESTIONS:
        questions = random.Random(0).sample(questions, MAX_QUESTIONS)
    questions.sort(key=lambda q: (q.doc, int(q.section.split()[1])))
    return questions


def golden_rows(index: StoredIndex, questions: list[Question]) -> list[list[int]]:
    """Per question, the rows of its file's chunks whose heading path ends with its section."""
    docs = index.chunks["doc_id"].to_pylist()
    paths = index.chunks["heading"].to_pylist()
    rows: dict[tuple[str, str], list[int]] = {}
    for row, (doc, path) in enumerate(zip(docs, paths)):
        rows.setdefault((doc, (path or "").split(" > ")[-1]), []).append(row)
    return [rows.get((q.doc, q.section), []) for q in questions]


def summary_questions(shared: Path, index: StoredIndex) -> tuple[list[Question], list[list[int]]]:
    """The docs corpus's summaries as questions, each with its own chunk (by link) as the golden one."""
    records = json.loads((shared / "anthropic_docs" / "anthropic_summary_indexed_docs.json").read_text())
    row_of = {link: row for row, link in enumerate(index.chunks["chunk_id"].to_pylist())}
    kept = [record for record in records if record.get("summary") and record["chunk_link"] in row_of]
    return [Question(record["summary"], record["chunk_link"], "") for record in kept], [
        [row_of[record["chunk_link"]]] for record in kept
    ]


DOCSTRING_MIN_WORDS = 6
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`])")


def docstring_node(node: ast.AST) -> ast.Expr | None:
    first = (
        node.body[0]
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
        else None
    )
    return (
        first
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
        else None
    )


def strip_docstrings(source: str) -> str | None:
    """The source without its docstrings (their lines blanked; a body left empty gets ``...``), or None if unparsable."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines()
    for node in ast.walk(tree):
        doc = docstring_node(node)
        if doc is None or doc.end_lineno is None:
            continue
        indent = re.match(r"\s*", lines[doc.lineno - 1]).group(0)  # type: ignore[union-attr]
        lines[doc.lineno - 1 : doc.end_lineno] = [""] * (doc.end_lineno - doc.lineno + 1)
        if len(node.body) == 1:  # type: ignore[attr-defined]
            lines[doc.lineno - 1] = f"{indent}..."
    return "\n".join(lines) + "\n"


def first_sentence(docstring: str) -> str:
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    return SENTENCE.split(paragraph)[0]


def mine(package: Path, copy: Path) -> list[tuple[str, str, str]]:
    """Write the docstring-free copy of ``package`` to ``copy``; return (question, file, header line) triples."""
    found: list[tuple[str, str, str]] = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8", errors="replace")
        stripped = strip_docstrings(source)
        if stripped is None:
            continue
        relative = path.relative_to(package)
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_text(stripped, encoding="utf-8")
        lines = stripped.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or node.name.startswith("_"):
                continue
            question = first_sentence(ast.get_docstring(node) or "")  # none: no words, left out below
            header = lines[node.lineno - 1].strip()
            if (
                len(question.split()) >= DOCSTRING_MIN_WORDS
                and header
                and sum(line.strip() == header for line in lines) == 1
            ):
                found.append((question, str(relative), header))
    return found


def write_evalset(copy: Path, mined: list[tuple[str, str, str]], out: Path, seed: int = 0) -> int:
    """Golden chunk = the chunk of the copy (as ctxrag loads it) holding the header line. Returns the query count."""
    chunks: dict[str, list[tuple[int, str]]] = {}
    for chunk in load_source(copy).chunks:
        chunks.setdefault(chunk.doc_id, []).append((chunk.chunk_index, chunk.content))
    seen: set[str] = set()
    records = []
    for question, doc, header in mined:
        holding = [
            index
            for index, content in chunks.get(doc, [])
            if any(line.strip() == header for line in content.splitlines())
        ]
        if len(holding) != 1 or question in seen:
            continue
        seen.add(question)
        records.append({"query": question, "golden_chunk_uuids": [[doc, holding[0]]]})
    if len(records) > MAX_QUESTIONS:
        records = random.Random(seed).sample(records, MAX_QUESTIONS)
    out.write_text("".join(json.dumps(record) + "\n" for record in records))
    return len(records)


def prepare_repository(package: Path, home: Path, name: str) -> tuple[Path, Path]:
    """The docstring-free copy of ``package`` and its question file under ``home`` (made once, then reused)."""
    copy, evalset = home / "sources" / name, home / f"{name}.jsonl"
    if not evalset.exists():
        copy.mkdir(parents=True, exist_ok=True)
        count = write_evalset(copy, mine(package, copy), evalset)
        print(f"{package.name}: {count} questions", file=sys.stderr, flush=True)
    return copy, evalset

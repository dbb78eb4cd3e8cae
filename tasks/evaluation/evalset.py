"""Evaluation sets: the cookbook's JSONL (golden ``[doc uuid, chunk index]`` pairs) and the docs JSON (golden links).

The format is detected by its fields; a bad record stops the load with a message naming the file and the record.
A docs question with an empty ``correct_chunks`` list cannot be scored: it is skipped with a warning (``warnings``),
and the load fails only when no question is left.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ctxrag.tasks.common.models import CorpusError
from ctxrag.tasks.load.jsonio import read_utf8


class EvalFormat(str, Enum):
    PASS_AT_K = "jsonl"  # golden (doc_id, chunk_index) pairs, scored with Pass@k
    DOCS = "docs"  # golden chunk links, scored with precision / recall / F1 / MRR

    @property
    def default_ks(self) -> list[int]:
        return [5, 10, 20] if self is EvalFormat.PASS_AT_K else [3]


@dataclass(frozen=True)
class EvalQuery:
    query_id: str
    query: str
    golden: tuple[str, ...]  # chunk references: "doc_id#index" (JSONL) or a chunk link (docs)
    answer: str = ""


@dataclass(frozen=True)
class EvalSet:
    path: str
    format: EvalFormat
    queries: list[EvalQuery]
    warnings: list[str] = field(default_factory=list)  # records skipped, for the user to see


def golden_ref(doc_id: str, chunk_index: int) -> str:
    """How a JSONL golden pair and an indexed chunk are matched."""
    return f"{doc_id}#{chunk_index}"


def load_evalset(path: str | Path) -> EvalSet:
    path = Path(path)
    text = read_utf8(path, "evaluation set")
    if text.lstrip().startswith("["):
        return _load_docs(path, text)
    return _load_jsonl(path, text)


def _load_jsonl(path: Path, text: str) -> EvalSet:
    queries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise CorpusError(f"{where}: malformed JSON: {error.msg} (column {error.colno})") from None
        if not isinstance(record, dict) or "query" not in record or "golden_chunk_uuids" not in record:
            raise CorpusError(f"{where}: a JSONL evaluation record needs 'query' and 'golden_chunk_uuids'")
        pairs = record["golden_chunk_uuids"]
        if not isinstance(record["query"], str) or not record["query"].strip():
            raise CorpusError(f"{where}: 'query' must be a non-empty string")
        if not isinstance(pairs, list) or not pairs or not all(_is_pair(pair) for pair in pairs):
            raise CorpusError(
                f"{where}: 'golden_chunk_uuids' must be a non-empty list of [doc uuid, chunk index] pairs"
            )
        golden = tuple(dict.fromkeys(golden_ref(doc, index) for doc, index in pairs))
        queries.append(EvalQuery(str(record.get("id", number)), record["query"], golden, str(record.get("answer", ""))))
    if not queries:
        raise CorpusError(f"{path.name}: no evaluation queries")
    return EvalSet(str(path), EvalFormat.PASS_AT_K, queries)


def _load_docs(path: Path, text: str) -> EvalSet:
    try:
        records = json.loads(text)
    except json.JSONDecodeError as error:
        raise CorpusError(
            f"{path.name}: malformed JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    queries, seen, warnings = [], set(), []
    for number, record in enumerate(records):
        where = f"{path.name}: record {number}"
        if not isinstance(record, dict) or "question" not in record or "correct_chunks" not in record:
            raise CorpusError(f"{where}: a docs evaluation record needs 'question' and 'correct_chunks'")
        links = record["correct_chunks"]
        if not isinstance(record["question"], str) or not record["question"].strip():
            raise CorpusError(f"{where}: 'question' must be a non-empty string")
        if not isinstance(links, list) or not all(isinstance(link, str) for link in links):
            raise CorpusError(f"{where}: 'correct_chunks' must be a list of chunk links")
        query_id = str(record.get("id", number))
        if query_id in seen:
            raise CorpusError(f"{where}: duplicate id {query_id!r}")
        seen.add(query_id)
        if not links:
            question = " ".join(record["question"].split())
            question = question if len(question) <= 80 else question[:77] + "..."
            warnings.append(
                f"{where} (id {query_id!r}, question {question!r}): 'correct_chunks' is empty; question skipped"
            )
            continue
        answer = record.get("correct_answer", "")
        queries.append(EvalQuery(query_id, record["question"], tuple(dict.fromkeys(links)), str(answer)))
    if not queries:
        skipped = f" ({len(warnings)} skipped: their 'correct_chunks' is empty)" if warnings else ""
        raise CorpusError(f"{path.name}: no evaluation queries{skipped}")
    return EvalSet(str(path), EvalFormat.DOCS, queries, warnings)


def _is_pair(pair: object) -> bool:
    return (
        isinstance(pair, list)
        and len(pair) == 2
        and isinstance(pair[0], str)
        and isinstance(pair[1], int)
        and not isinstance(pair[1], bool)
    )

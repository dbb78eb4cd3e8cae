"""Reading a JSON corpus file and checking its records' fields, with messages that name file, record and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxrag.tasks.common.models import CorpusError


def type_name(value: Any) -> str:
    """The Python type name of a decoded JSON value, with ``None`` shown as JSON's ``null``."""
    return "null" if value is None else type(value).__name__


def read_utf8(path: Path, what: str = "file") -> str:
    """The text of ``path`` (UTF-8, a byte-order mark dropped); ``CorpusError`` names the file and what is wrong. The
    bytes are dropped once decoded: a 1.5 GB corpus is never held twice."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not valid UTF-8 (byte offset {exc.start}): {exc.reason}") from None


def read_records(path: Path) -> list[Any]:
    """Read ``path`` as UTF-8 JSON whose top level is a non-empty list; raise ``CorpusError`` otherwise. The text is
    dropped once parsed: a 1.5 GB corpus never holds its bytes, text and records at once."""
    text = read_utf8(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from exc
    del text
    if not isinstance(data, list):
        raise CorpusError(f"{path}: the top level must be a list of records, got {type_name(data)}")
    if not data:
        raise CorpusError(f"{path}: no documents (the list is empty)")
    return data


def record_label(index: int, record: Any, id_field: str) -> str:
    """``record 3 (doc_id 'doc_4')``, or ``record 3`` when the id is missing or not a string."""
    if isinstance(record, dict) and isinstance(record.get(id_field), str):
        return f"record {index} ({id_field} {record[id_field]!r})"
    return f"record {index}"


def require_object(value: Any, where: str) -> dict[str, Any]:
    """``value`` itself, if it is a JSON object."""
    if not isinstance(value, dict):
        raise CorpusError(f"{where}: must be an object, got {type_name(value)}")
    return value


def _field(record: dict[str, Any], name: str, where: str) -> Any:
    if name not in record:
        raise CorpusError(f"{where}: missing required field {name!r}")
    return record[name]


def require_str(record: dict[str, Any], name: str, where: str, *, non_empty: bool = False) -> str:
    """The string field ``name``; ``non_empty`` also rejects "" (used for ids)."""
    value = _field(record, name, where)
    if not isinstance(value, str):
        raise CorpusError(f"{where}: {name!r} must be a string, got {type_name(value)}")
    if non_empty and not value.strip():
        raise CorpusError(f"{where}: {name!r} must be a non-empty string")
    return value


def optional_str(record: dict[str, Any], name: str, where: str) -> str:
    """The string field ``name`` if present and not null, else ""."""
    value = record.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CorpusError(f"{where}: {name!r} must be a string, got {type_name(value)}")
    return value


def require_int(record: dict[str, Any], name: str, where: str) -> int:
    """The integer field ``name`` (booleans are not integers here)."""
    value = _field(record, name, where)
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorpusError(f"{where}: {name!r} must be an integer, got {type_name(value)}")
    if value < 0:
        raise CorpusError(f"{where}: {name!r} must not be negative, got {value}")
    return value


def require_list(record: dict[str, Any], name: str, where: str) -> list[Any]:
    """The list field ``name``."""
    value = _field(record, name, where)
    if not isinstance(value, list):
        raise CorpusError(f"{where}: {name!r} must be a list, got {type_name(value)}")
    return value

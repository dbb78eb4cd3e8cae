"""Index names: what a name may be (it becomes a folder, an Elasticsearch alias, a Prefect artifact key)."""

from __future__ import annotations

import re

from ctxrag.storage.errors import UserError

DEFAULT_NAME = "default"  # the index a command or call uses when none is named
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")


class InvalidIndexName(UserError, ValueError):
    """An index name that is not allowed."""


def validate_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidIndexName(
            f"invalid index name {name!r}: use lowercase letters, digits, '-' and '_' "
            "(starting with a letter or digit, at most 100 characters)"
        )
    return name

"""A deployment run's paths are checked against the folders it was served for (tasks/stages/input_checks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.stages.input_checks import ALLOWED_VARIABLE, allowed_folders, check_allowed


def test_paths_inside_the_served_folders_pass_and_others_are_refused_naming_the_parameter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus, secret = tmp_path / "corpus", tmp_path / "private"
    corpus.mkdir()
    secret.mkdir()
    (corpus / "escape").symlink_to(secret)
    monkeypatch.setenv("CTXRAG_HOME", str(tmp_path / "home"))
    check_allowed(
        {"source": str(corpus), "evalset": str(corpus / "q.jsonl"), "options.gate.evalset": None}, [corpus.resolve()]
    )
    check_allowed({}, [corpus.resolve()], home=str(tmp_path / "home"))  # the run's own CTXRAG_HOME
    for path in (secret, corpus / ".." / "private", corpus / "escape", Path("/etc")):  # `..` and links resolved
        with pytest.raises(
            InvalidInput,
            match=r"deployment parameter source=.* is outside the folders this deployment was served for .*--allow-source",
        ):
            check_allowed({"source": str(path)}, [corpus.resolve()])
    with pytest.raises(InvalidInput, match=r"deployment parameter home=.* is neither this deployment's CTXRAG_HOME"):
        check_allowed({}, [corpus.resolve()], home=str(secret))


def test_the_variable_lists_folders_and_unset_limits_nothing(tmp_path: Path) -> None:
    assert allowed_folders({}) is None
    assert allowed_folders({ALLOWED_VARIABLE: f"{tmp_path}:{tmp_path / 'b'}"}) == [
        tmp_path.resolve(),
        (tmp_path / "b").resolve(),
    ]

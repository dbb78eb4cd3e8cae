"""One settings object: every CTXRAG_* variable typed, defaulted and checked in one place, read by every reader through
it, made again only when the environment changes, and what a resident search must share with its caller."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.settings import (
    PATH_VARIABLES,
    Settings,
    reset_settings,
    settings,
    variables,
)
from tests.helpers import REPO

NAMES = [each.metadata["variable"] for each in variables()]
# A valid value other than the default for each variable, and the field value it gives.
GIVEN = {
    "CTXRAG_HOME": ("/srv/ctxrag/../ctxrag", Path("/srv/ctxrag")),
    "CTXRAG_CACHE_DIR": ("~/cache", Path("~/cache").expanduser()),
    "CTXRAG_MODELS_DIR": ("/models", Path("/models")),
    "CTXRAG_RERANK": (" local:/models/ce ", "local:/models/ce"),
    "CTXRAG_EMBED_PRECISION": ("INT8", "int8"),
    "CTXRAG_PREFECT_SERVER": ("temporary", "temporary"),
    "CTXRAG_TASK_RUNNER": ("dask", "dask"),
    "CTXRAG_DASK_ADDRESS": ("tcp://scheduler:8786", "tcp://scheduler:8786"),
    "CTXRAG_TASK_WORKERS": ("2", 2),
    "CTXRAG_VOYAGE_CONCURRENCY": ("3", 3),
    "CTXRAG_VOYAGE_TOKENS_PER_MINUTE": ("3000000", 3_000_000.0),
    "CTXRAG_COHERE_CONCURRENCY": ("1", 1),
    "CTXRAG_COHERE_TOKENS_PER_MINUTE": ("100000.5", 100_000.5),
    "CTXRAG_SEARCH_IDLE_MINUTES": ("0.5", 0.5),
    "CTXRAG_SEARCH_TOKEN": ("a-token-of-twenty-chars", "a-token-of-twenty-chars"),
    "CTXRAG_ALLOWED_SOURCES": (f"/srv/a{os.pathsep}/srv/b", (Path("/srv/a"), Path("/srv/b"))),
    "CTXRAG_PROJECT_DIR": ("/srv/project", "/srv/project"),
}
BAD = {
    "CTXRAG_EMBED_PRECISION": "int4",
    "CTXRAG_PREFECT_SERVER": "forever",
    "CTXRAG_TASK_RUNNER": "ray",
    "CTXRAG_TASK_WORKERS": "four",
    "CTXRAG_VOYAGE_CONCURRENCY": "0",
    "CTXRAG_COHERE_TOKENS_PER_MINUTE": "-5",
    "CTXRAG_SEARCH_IDLE_MINUTES": "soon",
}


def test_every_variable_has_a_name_type_default_and_meaning_and_the_table_above_covers_them() -> None:
    assert sorted(NAMES) == sorted(GIVEN) and len(set(NAMES)) == len(NAMES)
    for each in variables():
        assert each.metadata["meaning"] and each.type and each.name, each.metadata["variable"]


def test_defaults_with_nothing_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    chosen = Settings.from_environment({"HOME": str(tmp_path / "user")})
    assert chosen.home == tmp_path.resolve() / ".ctxrag"
    assert chosen.cache_dir == tmp_path.resolve() / "user" / ".cache" / "ctxrag"
    assert chosen.models_dir == chosen.cache_dir / "models"
    assert (chosen.rerank, chosen.embed_precision, chosen.prefect_server, chosen.task_runner) == (
        "",
        "auto",
        None,
        "threads",
    )
    assert (chosen.task_workers, chosen.voyage_concurrency, chosen.cohere_concurrency) == (4, 4, 4)
    assert (chosen.voyage_tokens_per_minute, chosen.cohere_tokens_per_minute, chosen.dask_address) == (None,) * 3
    assert (chosen.search_idle_minutes, chosen.search_token, chosen.allowed_sources) == (10.0, None, None)
    assert chosen.given == frozenset() and not chosen.under_ci
    assert all(chosen.source(name) == "default" for name in NAMES)
    xdg = Settings.from_environment({"HOME": "/nowhere", "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert xdg.cache_dir == tmp_path.resolve() / "xdg" / "ctxrag" and xdg.models_dir == xdg.cache_dir / "models"
    ci = Settings.from_environment({"CI": "true"})
    assert ci.under_ci and ci.search_idle_minutes == 0.0  # a CI job leaves no resident search behind


@pytest.mark.parametrize("name", sorted(GIVEN))
def test_each_variable_is_read_from_the_environment(name: str) -> None:
    raw, value = GIVEN[name]
    chosen = Settings.from_environment({name: raw})
    assert getattr(chosen, _field(name)) == value
    assert chosen.source(name) == "environment" and chosen.given == {name}


def test_blank_is_unset_but_an_empty_token_or_folder_list_is_kept(tmp_path: Path) -> None:
    blank = Settings.from_environment({"CTXRAG_HOME": "  ", "CTXRAG_TASK_WORKERS": "", "HOME": str(tmp_path)})
    assert blank.home == Path(".ctxrag").resolve() and blank.task_workers == 4
    empty = Settings.from_environment({"CTXRAG_SEARCH_TOKEN": "", "CTXRAG_ALLOWED_SOURCES": ""})
    assert empty.search_token == "" and empty.allowed_sources == ()  # refused by serve-search; nothing allowed


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_one_line_naming_the_variable(name: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        Settings.from_environment({name: BAD[name]})
    message = str(raised.value)
    assert message.startswith(f"{name}={BAD[name]!r}: ") and "\n" not in message, message


def test_every_bad_value_is_named_in_the_one_line_and_a_secret_is_not_shown() -> None:
    with pytest.raises(InvalidInput) as raised:
        Settings.from_environment({"CTXRAG_TASK_WORKERS": "x", "CTXRAG_SEARCH_IDLE_MINUTES": "nan"})
    assert "CTXRAG_TASK_WORKERS='x'" in str(raised.value) and "CTXRAG_SEARCH_IDLE_MINUTES='nan'" in str(raised.value)
    chosen = Settings.from_environment({"CTXRAG_SEARCH_TOKEN": "a-secret-token-value"})
    assert chosen.shown("CTXRAG_SEARCH_TOKEN") == "(hidden)" and "a-secret" not in repr(chosen.resident_key({}))


def test_made_once_and_again_only_when_a_variable_it_reads_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXRAG_HOME", str(tmp_path / "one"))
    first = settings()
    assert settings() is first and first.home == tmp_path / "one"
    monkeypatch.setenv("TERM", "something-else")  # not read: the same object
    assert settings() is first
    monkeypatch.setenv("CTXRAG_HOME", str(tmp_path / "two"))  # a program setting its home around a call
    assert settings().home == tmp_path / "two"
    monkeypatch.delenv("CTXRAG_HOME")
    monkeypatch.chdir(tmp_path)  # a relative default follows the working folder
    assert settings().home == tmp_path.resolve() / ".ctxrag"
    kept = settings()
    reset_settings()
    assert settings() is not kept and settings() == kept


def test_the_resident_key_holds_effective_values_and_what_else_changes_an_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "ce").mkdir(parents=True)
    base = {"HOME": str(tmp_path), "TERM": "xterm", "CTXRAG_TESTS_SESSION_HOME": "/elsewhere"}
    key = Settings.from_environment(base).resident_key(base)
    assert key["CTXRAG_HOME"] == str(tmp_path.resolve() / ".ctxrag")  # the default, resolved
    assert all(key[name] for name in PATH_VARIABLES)
    assert "CTXRAG_SEARCH_IDLE_MINUTES" not in key and "TERM" not in key and "CTXRAG_TESTS_SESSION_HOME" not in key
    same_home = {**base, "CTXRAG_HOME": ".ctxrag"}  # unset and set to its default: one home, one resident search
    assert Settings.from_environment(same_home).resident_key(same_home) == key
    for name, value in (
        ("XDG_CACHE_HOME", str(tmp_path / "xdg")),  # the cache folders, and Hugging Face's
        ("CUDA_VISIBLE_DEVICES", "0"),
        ("HF_HUB_OFFLINE", "0"),
        ("VOYAGE_API_KEY", "pa-other"),
        ("CTXRAG_RERANK", "local:models/ce"),
        ("CTXRAG_EMBED_PRECISION", "fp32"),
        ("CTXRAG_MODELS_DIR", str(tmp_path / "models")),
    ):
        changed = {**base, name: value}
        assert Settings.from_environment(changed).resident_key(changed) != key, name
    relative = {**base, "CTXRAG_RERANK": "local:models/ce"}  # a relative folder is another model elsewhere
    assert Settings.from_environment(relative).resident_key(relative)["CTXRAG_RERANK"] == (
        f"local:{tmp_path.resolve() / 'models' / 'ce'}"
    )
    secret = {**base, "VOYAGE_API_KEY": "pa-secret-value", "CTXRAG_SEARCH_TOKEN": "another-secret-value"}
    digested = Settings.from_environment(secret).resident_key(secret)
    assert "pa-secret-value" not in repr(digested) and "another-secret-value" not in repr(digested)
    assert digested["VOYAGE_API_KEY"].startswith("sha256:")


def test_the_choices_are_the_readers_own() -> None:
    from ctxrag.prefect_commands.server_mode import SERVER_MODES
    from ctxrag.storage import settings as model
    from ctxrag.tasks.embedding.precision import PRECISIONS

    assert model.PRECISIONS == PRECISIONS and model.SERVER_MODES == SERVER_MODES


READ_DIRECTLY = re.compile(r"""environ(?:\.get\(|\[)\s*f?["']CTXRAG_""")
NAMED = re.compile(r"\bCTXRAG_[A-Z][A-Z0-9_]*[A-Z0-9]\b")
SOURCES = [path for folder in ("ctxrag", "tasks", "storage", "flows") for path in (REPO / folder).rglob("*.py")]


def test_every_reader_goes_through_the_model_and_every_variable_named_in_the_code_is_in_it() -> None:
    """No module but the model reads a CTXRAG_* variable from os.environ; every CTXRAG_* name in the package's code
    and in prefect.yaml is one of the model's."""
    readers, unknown = [], set()
    for path in SOURCES:
        if path.is_symlink() or path == REPO / "storage" / "settings.py":
            continue
        text = path.read_text(encoding="utf-8")
        if READ_DIRECTLY.search(text):
            readers.append(str(path.relative_to(REPO)))
        unknown |= set(NAMED.findall(text)) - set(NAMES)
    unknown |= set(NAMED.findall((REPO / "prefect.yaml").read_text(encoding="utf-8"))) - set(NAMES)
    assert not readers, f"read CTXRAG_* variables themselves: {readers}"
    assert not unknown, f"named in the code, not in ctxrag.storage.settings: {sorted(unknown)}"


def _field(name: str) -> str:
    return next(each.name for each in variables() if each.metadata["variable"] == name)

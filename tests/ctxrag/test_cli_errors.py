"""What the user sees when a command fails: one ``error: ...`` line and exit code 2 for what they can act on (bad
input, a corrupt file named in the message, an OS or Elasticsearch failure), a traceback for a bug in ctxrag.

The commands run in-process with typer's CliRunner (stdout and stderr apart), the user's view and injected bugs
alike; one test runs a real process, for the traceback Python itself prints. None of these commands starts a Prefect
run (see test_cli.py for index and evaluate).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import Result
from typer.testing import CliRunner

import ctxrag.cli as cli
from ctxrag.errors import user_message
from ctxrag.storage.index_store import IndexStore
from ctxrag.tasks.embedding.embed import EmbedderSpec
from tests.helpers import SAMPLE_CORPUS


def ctxrag(home: Path, *args: str, **env: str) -> Result:
    """The command as the user runs it, in-process: CTXRAG_HOME=home and ``env`` set for the call only."""
    # COLUMNS unset: the error line must not be wrapped at the default width either
    return CliRunner().invoke(cli.app, list(args), env={"CTXRAG_HOME": str(home), "COLUMNS": None, **env})


def one_error_line(result: Result) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert isinstance(result.exception, SystemExit)  # the command exited itself: no error escaped with a traceback
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def publish(home: Path, name: str = "docs", backend: str = "embedded") -> Path:
    texts = ["lemon kiwi", "mango melon"]
    chunks = pa.table(
        {
            "chunk_id": ["c0", "c1"],
            "doc_id": ["d", "d"],
            "chunk_index": [0, 1],
            "key": ["k0", "k1"],
            "content": texts,
            "context": ["", ""],
        }
    )
    manifest = {
        "config": {"backend": "embedded", "embedder": EmbedderSpec().to_dict(), "contextualizer": {"name": "none"}},
        "counts": {"documents": 1, "chunks": 2},
    }
    folder = IndexStore(home).publish(name, manifest, chunks, texts, np.eye(2, 4, dtype=np.float32))
    if backend == "elasticsearch":  # as if built on a cluster this machine cannot reach
        written = json.loads((folder / "manifest.json").read_text())
        written["config"]["backend"], written["elasticsearch"] = "elasticsearch", {"alias": name, "index": f"{name}-v1"}
        (folder / "manifest.json").write_text(json.dumps(written))
    return folder


def dead_port() -> int:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- the user's view: real subprocesses --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["list"], ["search", "kiwi", "--name", "docs"], ["delete", "docs"], ["gc"]],
    ids=["list", "search", "delete", "gc"],
)
def test_a_corrupt_manifest_is_one_line_naming_the_file(tmp_path: Path, command: list[str]) -> None:
    home = tmp_path / "home"
    manifest = publish(home) / "manifest.json"
    manifest.write_text('{"config": {"backend": "embedded",')
    line = one_error_line(ctxrag(home, *command))
    assert f"{manifest}: corrupt index manifest: invalid JSON" in line
    assert IndexStore(home).names() == ["docs"]  # nothing was deleted


def test_list_and_search_work_on_a_sound_index(tmp_path: Path) -> None:
    home = tmp_path / "home"
    publish(home)
    listed = ctxrag(home, "list")
    assert listed.exit_code == 0 and listed.stdout.splitlines()[1].startswith("docs\t1\t2\t"), listed.stderr


def test_an_os_error_is_one_line_naming_the_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("a file where CTXRAG_HOME should be a folder")
    line = one_error_line(ctxrag(home, "gc"))
    assert str(home / "artifacts") in line and "Not a directory" in line


def test_an_unreachable_elasticsearch_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    publish(home, "on-es", backend="elasticsearch")
    url = f"http://127.0.0.1:{dead_port()}"
    line = one_error_line(
        ctxrag(home, "search", "kiwi", "--name", "on-es", "--strategy", "bm25", ELASTICSEARCH_URL=url)
    )
    assert line.startswith("error: Elasticsearch request failed:")
    line = one_error_line(ctxrag(home, "delete", "on-es", ELASTICSEARCH_URL=url))
    assert line.startswith("error: Elasticsearch request failed:")
    assert IndexStore(home).names() == ["on-es"]  # kept: the delete can be run again once the cluster answers


@pytest.mark.parametrize("option", ["--include", "--exclude"])
def test_a_bad_folder_pattern_is_one_line_before_prefect_starts(
    tmp_path: Path, option: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.py").write_text("x = 1\n")
    home = tmp_path / "home"

    def no_prefect(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command got as far as Prefect")

    import ctxrag.runs as runs

    monkeypatch.setattr(runs, "run_flow", no_prefect)  # a command that got as far as Prefect fails with another error
    line = one_error_line(ctxrag(home, "index", str(corpus), option, "*.py", option, "a\\"))
    assert line == f"error: {option}: not a valid gitignore-style pattern: 'a\\\\'"
    assert not home.exists()  # nothing was started or written


def test_bad_corpus_is_one_clear_line_and_no_traceback(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.json"
    corpus.write_text(
        json.dumps(
            [{"doc_id": "d1", "original_uuid": "u1", "content": "x", "chunks": [{"chunk_id": "c", "content": "y"}]}]
        )
    )
    result = ctxrag(tmp_path / "home", "index", str(corpus))
    assert result.exit_code == 2
    assert "corpus.json" in result.stderr and "original_index" in result.stderr
    assert isinstance(result.exception, SystemExit) and result.stdout == ""  # exited itself: no traceback


def test_a_window_below_16_word_pieces_fails_before_any_work(tmp_path: Path) -> None:
    result = ctxrag(tmp_path / "home", "index", str(SAMPLE_CORPUS), "--window-tokens", "8")
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)  # exited itself: no traceback
    assert "window_tokens 8" in result.stderr and result.stdout == ""
    assert not (tmp_path / "home").exists()


@pytest.mark.slow  # a process that imports ctxrag's command
def test_an_injected_bug_shows_its_traceback_in_a_real_process(tmp_path: Path) -> None:
    """A real process: the traceback on stderr and exit code 1 are Python's own handling of an uncaught error, which
    CliRunner (it catches the error) cannot show."""
    code = (
        "import ctxrag.storage.index_store as s; s.IndexStore.names = lambda self: 1 / 0; "
        "from ctxrag.cli import main; main()"
    )
    environment = {**os.environ, "CTXRAG_HOME": str(tmp_path / "home")}
    result = subprocess.run(
        [sys.executable, "-c", code, "list"], capture_output=True, text=True, env=environment, timeout=120
    )
    assert result.returncode == 1
    assert (
        "Traceback (most recent call last)" in result.stderr and "ZeroDivisionError: division by zero" in result.stderr
    )
    assert "error:" not in result.stderr


# --- bugs keep their traceback: typer's CliRunner, in-process ----------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CTXRAG_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli.app, list(args))


def a_bug(error: BaseException):  # type: ignore[no-untyped-def]
    def raising(*args: object, **kwargs: object) -> None:
        raise error

    return raising


def assert_bug(result, kind: type[BaseException], frame: str) -> None:  # type: ignore[no-untyped-def]
    assert isinstance(result.exception, kind), (result.exit_code, result.output)
    assert result.exit_code == 1 and "error:" not in result.output
    shown = "".join(traceback.format_exception(*result.exc_info))
    assert f"in {frame}" in shown and kind.__name__ in shown


def test_a_zero_division_in_ctxrag_propagates_with_its_traceback(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(IndexStore, "names", a_bug(ZeroDivisionError("division by zero")))
    assert_bug(invoke("list"), ZeroDivisionError, "raising")


@pytest.mark.parametrize(
    ("target", "command"),
    [
        ("ctxrag.tasks.retrieval.rerank.RerankSpec.from_str", ["search", "kiwi", "--rerank", "cohere"]),
        ("ctxrag.storage.index_store.IndexStore.delete", ["delete", "docs"]),
        ("ctxrag.tasks.gc.collect_garbage", ["gc"]),
    ],
    ids=["search", "delete", "gc"],
)
@pytest.mark.parametrize("kind", [ValueError, RuntimeError, KeyError])
def test_a_bare_builtin_error_is_a_bug_not_a_one_liner(
    home: Path, monkeypatch: pytest.MonkeyPatch, target: str, command: list[str], kind: type[Exception]
) -> None:
    monkeypatch.setattr(target, a_bug(kind("something inside ctxrag went wrong")))
    assert_bug(invoke(*command), kind, "raising")


def test_a_listed_message_raised_somewhere_else_is_still_a_bug(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ctxrag.tasks.retrieval.rerank.RerankSpec.from_str", a_bug(ValueError("unknown reranker 'x'")))
    assert_bug(invoke("search", "kiwi", "--rerank", "cohere"), ValueError, "raising")  # 'none' never asks RerankSpec


# --- user errors stay one line -----------------------------------------------------------------------------------


def test_bad_input_raised_as_a_bare_value_error_is_still_one_line(home: Path) -> None:
    result = invoke("search", "kiwi", "--rerank", "bogus")
    assert result.exit_code == 2 and result.exception is not None
    assert "error: unknown reranker 'bogus'" in result.output


def test_a_busy_gc_is_one_line(home: Path) -> None:
    from ctxrag.tasks.gc import artifact_lock

    with artifact_lock(home, exclusive=True):
        result = invoke("gc")
    assert result.exit_code == 2 and "error: an index build is running" in result.output


def test_a_running_build_makes_delete_one_line(home: Path) -> None:
    publish(home)
    with IndexStore(home).lock("docs"):
        result = invoke("delete", "docs")
    assert result.exit_code == 2 and "error: index 'docs' is being built by another run" in result.output


def test_a_full_disk_is_one_line(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(home / "artifacts" / "contexts" / "part.parquet"))
    monkeypatch.setattr("ctxrag.tasks.gc.collect_garbage", a_bug(full))
    result = invoke("gc")
    assert result.exit_code == 2
    assert f"error: {home / 'artifacts' / 'contexts' / 'part.parquet'}: No space left on device" in result.output


def test_an_elasticsearch_api_error_is_one_line(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig
    from elasticsearch import BadRequestError

    meta = ApiResponseMeta(
        status=400, http_version="1.1", headers=HttpHeaders(), duration=0.0, node=NodeConfig("http", "localhost", 9200)
    )
    body = {"error": {"type": "search_phase_execution_exception", "reason": "all shards failed"}}
    monkeypatch.setattr(IndexStore, "delete", a_bug(BadRequestError("search_phase_execution_exception", meta, body)))
    result = invoke("delete", "docs")
    assert result.exit_code == 2
    assert "error: Elasticsearch answered 400: search_phase_execution_exception: all shards failed" in result.output


def test_an_invalid_option_is_one_line_and_a_bare_value_error_is_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke("gc", "--paid-older-than", "-1")
    assert result.exit_code == 2  # typer's own check
    from ctxrag.tasks.retrieval.search import Strategy

    with pytest.raises(ValueError) as unknown:
        Strategy.from_str("nonsense")
    assert user_message(unknown.value) == "unknown strategy 'nonsense'; choose one of: " + ", ".join(
        s.value for s in Strategy
    )
    assert user_message(ValueError("an internal invariant broke")) is None
    monkeypatch.setattr(IndexStore, "delete", a_bug(ValueError("an internal invariant broke")))
    result = invoke("delete", "docs")
    assert isinstance(result.exception, ValueError) and result.exit_code == 1

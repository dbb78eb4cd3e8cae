"""``ctxrag index --plan`` as a user runs it: no Prefect server or flow, no paid call, the plan on stdout.

In-process with typer's CliRunner; the plan of the codebase corpus runs in a real process, for what only a process
shows (its start-up time, and that no Prefect home is made).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from ctxrag.tasks.context.claude.pricing import PRICES_AS_OF
from tests.equipment.anthropic_simulator import AnthropicSimulator, ApiError
from tests.helpers import SHARED_DATA, write_corpus

CODEBASE = SHARED_DATA / "codebase" / "codebase_chunks.json"


def ctxrag(tmp_path: Path, *args: str, columns: int = 200) -> tuple[subprocess.CompletedProcess[str], float]:
    """The command in a subprocess with its own, empty PREFECT_HOME and no key; (result, seconds)."""
    env = {
        **os.environ,
        "CTXRAG_HOME": str(tmp_path / "home"),
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "COLUMNS": str(columns),
    }
    for variable in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY", "PREFECT_API_URL"):
        env.pop(variable, None)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", "from ctxrag.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return result, time.perf_counter() - started


def plan(tmp_path: Path, *args: str, columns: int = 200) -> Result:
    """The command in-process (typer's CliRunner), CTXRAG_HOME in tmp_path and no key, for the call only."""
    import ctxrag.cli as cli

    env = {
        "CTXRAG_HOME": str(tmp_path / "home"),
        "COLUMNS": str(columns),
        "ANTHROPIC_API_KEY": None,
        "VOYAGE_API_KEY": None,
    }
    return CliRunner().invoke(cli.app, list(args), env=env)


@pytest.mark.slow  # a new process
@pytest.mark.skipif(not CODEBASE.is_file(), reason=f"{CODEBASE} is not here")
def test_plan_of_the_codebase_corpus_is_one_json_object_and_starts_nothing(tmp_path: Path) -> None:
    """A real process: the seconds include its imports, and PREFECT_HOME is its own (this process's Prefect is set)."""
    result, seconds = ctxrag(
        tmp_path, "index", str(CODEBASE), "--contextualizer", "claude", "--embedder", "voyage", "--plan", "--json"
    )
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)  # the whole of stdout parses
    assert plan["chunks"] == 737 and set(plan["modes"]) == {"per-chunk", "per-document", "batch", "per-document-batch"}
    assert plan["token_counts"].startswith("estimated") and plan["embedding"]["cost_usd"] > 0
    assert not (tmp_path / "prefect").exists()  # no Prefect home, database or server was made
    assert not (tmp_path / "home").exists()  # nothing written: no key, so no token counts stored either
    assert (
        seconds < 15
    )  # the target is 5 s (benchmarks/results/claude_costs_simulated.md measured it); this guards against a slide


def test_plan_table_fits_a_narrow_terminal_and_names_what_it_assumes(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus, chunks_per_doc=25, words_per_chunk=200, small_chunks=3)
    result = plan(tmp_path, "index", str(corpus), "--contextualizer", "claude", "--plan", "--rpm", "50", columns=80)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert "…" not in result.stdout and max(len(line) for line in result.stdout.splitlines()) <= 80
    text = " ".join(result.stdout.split())  # lines wrap at 80 columns
    for words in (
        "per-document-",
        "estimated",
        "assumed 75 tokens",
        "--rpm 50",
        "cache minimum",
        "uuid-2",
        f"prices of {PRICES_AS_OF}",
    ):
        assert words in text, words


def test_unknown_model_fails_in_one_line_naming_it_and_where_prices_live(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus)
    result = plan(tmp_path, "index", str(corpus), "--contextualizer", "claude", "--model", "claude-mystery-9", "--plan")
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)  # exited itself: no traceback
    assert "claude-mystery-9" in result.stderr and "tasks/context/claude/pricing.py" in result.stderr


def test_nothing_pending_says_so_and_costs_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.tasks.test_cost_plan import store_contexts

    corpus = tmp_path / "corpus.json"
    write_corpus(corpus)
    home = tmp_path / "home"
    store_contexts(home, corpus, "per-chunk")
    store_contexts(home, corpus, "per-document")
    result = plan(tmp_path, "index", str(corpus), "--contextualizer", "claude", "--plan")
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert "nothing to contextualize" in result.stdout and "cost $0" in result.stdout
    assert "already stored, not paid again: 12 contexts of per-chunk" in result.stdout


def test_with_a_key_the_plan_only_counts_tokens_and_never_enters_prefect(
    anthropic_simulator: AnthropicSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxrag.cli as cli

    def refuse_all_but_counting(original):  # type: ignore[no-untyped-def]
        def route(record, raw_ok):  # type: ignore[no-untyped-def]
            if record.path != "/v1/messages/count_tokens":
                raise ApiError(500, f"a plan must not call {record.method} {record.path}")
            return original(record, raw_ok)

        return route

    monkeypatch.setattr(anthropic_simulator, "_route", refuse_all_but_counting(anthropic_simulator._route))

    def no_prefect(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a plan started Prefect")

    import ctxrag.prefect_commands.local_server as local_server
    import ctxrag.runs as runs

    monkeypatch.setattr(local_server, "local_prefect_server", no_prefect)
    monkeypatch.setattr(runs, "run_flow", no_prefect)
    monkeypatch.setattr(runs, "run_index", no_prefect)
    monkeypatch.setenv("CTXRAG_HOME", str(tmp_path / "home"))
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus)
    result = CliRunner().invoke(cli.app, ["index", str(corpus), "--contextualizer", "claude", "--plan", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["token_counts"].startswith("counted") and plan["token_count_calls"]["now"] == 3 + 2
    assert {request.path for request in anthropic_simulator.requests} == {"/v1/messages/count_tokens"}
    assert all(request.status == 200 for request in anthropic_simulator.requests)
    assert sorted(path.name for path in (tmp_path / "home" / "artifacts").iterdir()) == [
        "token_counts"
    ]  # nothing else written
    assert "sk-ant" not in result.stdout

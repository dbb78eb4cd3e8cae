"""Each command imports only what it uses: ``search``, ``list``, ``--help``, ``--plan``, ``server status`` and every
refusal of bad input never import Prefect, and ``--help`` imports none of the pipeline (nor the services' mcp, FastAPI, uvicorn).

Each command runs in a fresh interpreter (imports are per process) that writes the modules it loaded when it exits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SAMPLE_CORPUS, SAMPLE_QUESTIONS, copy_home

pytestmark = pytest.mark.usefixtures("prefect_harness")

RECORD = (
    "import atexit, json, sys\n"
    "record = sys.argv.pop(1)\n"
    "atexit.register(lambda: open(record, 'w').write(json.dumps(sorted(sys.modules))))\n"
    "from ctxrag.cli import main\n"
    "main()\n"
)
# The pipeline's working parts and the libraries they stand on. ``--help`` reads the options' defaults from plain
# settings modules (ClaudeSettings, EmbedderSpec, the loader's file-size limit), which import none of these.
PIPELINE = (
    "prefect",
    "torch",
    "transformers",
    "sentence_transformers",
    "onnxruntime",
    "tokenizers",
    "numpy",
    "pyarrow",
    "pandas",
    "scipy",
    "bm25s",
    "faiss",
    "anthropic",
    "voyageai",
    "cohere",
    "elasticsearch",
    "ctxrag.flows.index",
    "ctxrag.flows.evaluate",
    "ctxrag.tasks.stages",
    "ctxrag.tasks.embedding.embed",
    "ctxrag.tasks.retrieval",
    "ctxrag.storage.index_store",
    "ctxrag.storage.artifacts",
    "ctxrag.storage.backends",
    "ctxrag.runs",
    "ctxrag.api",
    "mcp",
    "fastapi",
    "uvicorn",
    "ctxrag.services",
)


def loaded_modules(home: Path, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``ctxrag ARGS`` with no Prefect server configured; its result and the modules it imported."""
    record = tmp_path / "modules.json"
    env = {**os.environ, "CTXRAG_HOME": str(home), "COLUMNS": "200"}
    env.pop("PREFECT_API_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", RECORD, str(record), *args], capture_output=True, text=True, env=env, timeout=120
    )
    return result, set(json.loads(record.read_text()))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Path:
    return copy_home(sample_index, tmp_path_factory.mktemp("imports") / "home")


@pytest.mark.parametrize(
    "args, code",
    [
        (["search", "how are retries delayed?", "--name", "sample"], 0),
        (["search", "a question never asked before", "--name", "sample", "--json"], 0),
        (["list"], 0),
        (["inspect", "sample", "README.md"], 0),
        (["index", str(SAMPLE_CORPUS), "--name", "sample", "--plan"], 0),
        (["index", str(SAMPLE_CORPUS), "--contextualizer", "claude", "--plan"], 0),
        (["server", "status"], 1),
        (["index", "/no/such/folder"], 2),
        (["index", str(SAMPLE_CORPUS), "--backend", "nope"], 2),
        (["index", str(SAMPLE_CORPUS), "--name", "Bad Name"], 2),
        (["evaluate", str(SAMPLE_QUESTIONS), "--name", "sample", "--k", "5,-1"], 2),
        (["evaluate", str(SAMPLE_QUESTIONS), "--name", "sample", "--strategy", "nope"], 2),
        (["evaluate", str(SAMPLE_QUESTIONS), "--name", "no-such-index"], 2),
        (["evaluate", "/no/such/questions.jsonl", "--name", "sample"], 2),
        (["search", "x", "--name", "no-such-index"], 2),
    ],
)
def test_commands_that_run_no_flow_never_import_prefect(home: Path, tmp_path: Path, args: list[str], code: int) -> None:
    result, modules = loaded_modules(home, tmp_path, *args)
    assert result.returncode == code, result.stderr
    assert not {name for name in modules if name == "prefect" or name.startswith("prefect.")}, (
        f"ctxrag {' '.join(args)} imported Prefect"
    )


def test_a_local_search_of_a_seen_query_imports_no_table_library_no_keyword_builder_and_no_server_code(
    home: Path, tmp_path: Path
) -> None:
    """Arrow values are read without ``take`` (which imports pandas), the BM25 postings and stop words without bm25s
    (and scipy), and the server, ledger and loader code is left for the commands that use it. A new query imports
    none of them either: its vector is stored from buffers (``pa.array`` of any value imports pandas)."""
    query = f"RetryPolicy backoff delay {tmp_path.name}"
    new, modules_of_new = loaded_modules(home, tmp_path, "search", query, "--name", "sample")
    seen, modules = loaded_modules(home, tmp_path, "search", query, "--name", "sample")
    assert new.returncode == seen.returncode == 0, new.stderr + seen.stderr
    assert not {"bm25s", "scipy", "pandas"} & modules_of_new
    heavy = {
        "pandas",
        "bm25s",
        "scipy",
        "tenacity",
        "voyageai",
        "ctxrag.prefect_commands.local_server",
        "ctxrag.storage.ledger",
        "ctxrag.tasks.load",
        "mcp",
        "fastapi",
        "uvicorn",
        "ctxrag.services.warm",
        "ctxrag.services.resident",
        "ctxrag.services.requests",
    } & modules
    assert not heavy, f"ctxrag search of a seen query imported {sorted(heavy)}"
    # Of the services, only the resident search's address and client (standard library only).
    assert {name for name in modules if name.startswith("ctxrag.services.")} == {"ctxrag.services.resident_socket"}


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["index", "--help"],
        ["evaluate", "--help"],
        ["server", "--help"],
        ["trigger", "--help"],
        ["mcp", "--help"],
        ["serve-search", "--help"],
    ],
)
def test_help_imports_none_of_the_pipeline(home: Path, tmp_path: Path, args: list[str]) -> None:
    result, modules = loaded_modules(home, tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert not sorted(
        name for name in modules if name in PIPELINE or name.startswith(tuple(f"{part}." for part in PIPELINE))
    )


def test_a_re_index_with_nothing_to_publish_loads_no_model_and_no_table_library(home: Path, tmp_path: Path) -> None:
    """The no-op re-index runs its flow (Prefect is imported) but builds no Arrow table (pyarrow would import pandas),
    opens no BM25 index (bm25s) and loads no model."""
    from prefect.settings import PREFECT_API_URL

    record = tmp_path / "modules.json"
    env = {**os.environ, "CTXRAG_HOME": str(home), "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    result = subprocess.run(
        [sys.executable, "-c", RECORD, str(record), "index", str(SAMPLE_CORPUS), "--name", "sample", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0 and json.loads(result.stdout)["status"] == "unchanged", result.stderr
    modules = set(json.loads(record.read_text()))
    assert "prefect" in modules and not modules & {"pandas", "bm25s", "torch", "onnxruntime"}

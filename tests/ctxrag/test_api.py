"""The Python API: ``ctxrag.index``, ``search``, ``evaluate`` and ``open`` do the command's work, with its options and
defaults, and raise errors instead of exiting. Flows run in-process against the session's Prefect test harness."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ctxrag
from ctxrag.storage.errors import InvalidInput, UnknownIndexError, UserError
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.secrets import MissingKey
from ctxrag.tasks.options import GateOptions, IndexOptions
from ctxrag.tasks.retrieval.search import DEFAULT_STRATEGY
from tests.equipment.local_server import leftover_servers, stopped_afterwards, user_env
from tests.helpers import REPO, SAMPLE_CORPUS, SAMPLE_QUESTIONS, copy_home

QUERY = "retry backoff delay"


def blank(kind: type) -> dict[str, object]:
    """A report with every field of result ``kind`` (what a flow a test replaced would have returned)."""
    return {item.name: "ran" for item in dataclasses.fields(kind)}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Path:
    """A copy of the session's sample index (``ctxrag.index(SAMPLE_CORPUS, name="sample")``: a Path is fine)."""
    return copy_home(sample_index, tmp_path_factory.mktemp("api") / "home")


@pytest.fixture
def home(indexed: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CTXRAG_HOME", str(indexed))
    for variable in ("CO_API_KEY", "COHERE_API_KEY", "ANTHROPIC_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    return indexed


def test_search_returns_hits_with_text_document_score_and_each_retriever_s_rank(home: Path) -> None:
    hits = ctxrag.search(QUERY, name="sample", k=3)
    assert [hit.rank for hit in hits] == [1, 2, 3]
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    chunks = IndexStore(home).open("sample").chunks.to_pylist()
    by_id = {row["chunk_id"]: row for row in chunks}
    for hit in hits:
        row = by_id[hit.chunk_id]
        assert (hit.doc_id, hit.chunk_index, hit.content, hit.context) == (
            row["doc_id"],
            row["chunk_index"],
            row["content"],
            row["context"],
        )
        assert hit.ranks and set(hit.ranks) <= {"vector", "bm25"} and all(rank >= 1 for rank in hit.ranks.values())
        assert hit.found_by == sorted(hit.ranks)
    bm25 = ctxrag.search(QUERY, name="sample", k=3, strategy="bm25")
    assert [hit.ranks for hit in bm25] == [{"bm25": 1}, {"bm25": 2}, {"bm25": 3}]


def test_search_gives_what_the_command_prints(home: Path) -> None:
    from typer.testing import CliRunner

    import ctxrag.cli as cli

    result = CliRunner().invoke(
        cli.app, ["search", QUERY, "--name", "sample", "-k", "4", "--json"], env={"CTXRAG_HOME": str(home)}
    )
    assert result.exit_code == 0, (result.stderr, result.exception)
    printed = json.loads(result.stdout)
    answer = ctxrag.search(QUERY, name="sample", k=4)
    assert [(row["chunk_id"], row["score"], row["found_by"], row["content"]) for row in printed["hits"]] == [
        (hit.chunk_id, round(hit.score, 6), hit.found_by, hit.content) for hit in answer
    ]
    assert printed == answer.to_dict()  # the same answer: index, version, strategy, every hit's fields
    assert (printed["index"], printed["strategy"]) == ("sample", answer.strategy)
    assert {"source", "location", "ranks", "chunk_index", "context"} <= set(printed["hits"][0])


def test_path_and_language_filters_keep_only_their_sources_and_still_give_k(home: Path) -> None:
    markdown = ctxrag.search(QUERY, name="sample", k=5, language="markdown")
    assert len(markdown) == 5 and {hit.language for hit in markdown} == {"markdown"}
    assert [hit.rank for hit in markdown] == [1, 2, 3, 4, 5]
    docs = ctxrag.search(QUERY, name="sample", k=3, path="docs/")
    assert len(docs) == 3 and all(hit.source.startswith("docs/") for hit in docs)
    both = ctxrag.open("sample").search(QUERY, k=20, path="tinyq/", language="python")
    assert both.hits and all(hit.source.startswith("tinyq/") and hit.source.endswith(".py") for hit in both)
    assert not ctxrag.search(QUERY, name="sample", path="no/such/folder/").hits


def test_each_hit_says_where_it_is_and_its_repr_is_short(home: Path) -> None:
    hits = ctxrag.search(QUERY, name="sample", k=10)
    for hit in hits:
        assert hit.source == hit.doc_id and (SAMPLE_CORPUS / hit.source).is_file()
        assert hit.location.lines is not None
        first, last = hit.location.lines
        lines = (SAMPLE_CORPUS / hit.source).read_text().splitlines()
        assert hit.content.strip() == "\n".join(lines[first - 1 : last]).strip()
        assert len(repr(hit)) < 200 and f"{hit.score:.4f}" in repr(hit) and hit.content not in repr(hit)
    markdown = next(hit for hit in hits if hit.source.endswith(".md"))
    code = next(hit for hit in hits if hit.source.endswith(".py"))
    assert markdown.location.heading and not markdown.location.definitions
    assert code.location.definitions and not code.location.heading


def test_per_file_gives_each_file_once_at_its_best_chunk_with_its_other_chunks_lines(home: Path) -> None:
    index = ctxrag.open("sample")
    chunks = index.search(QUERY, k=100).hits  # every chunk of the sample, ranked
    grouped = index.search(QUERY, k=3, per_file=True).hits
    best = {hit.source: hit for hit in reversed(chunks)}  # each file's first chunk hit
    expected = sorted(best.values(), key=lambda hit: hit.rank)[:3]
    assert [hit.chunk_id for hit in grouped] == [hit.chunk_id for hit in expected]
    assert [hit.rank for hit in grouped] == [1, 2, 3] and len({hit.source for hit in grouped}) == 3
    for hit in grouped:  # ``also``: the file's other chunks among the first 3 x k chunk hits, in line order
        others = [c.location.lines for c in chunks[:9] if c.source == hit.source and c.chunk_id != hit.chunk_id]
        assert list(hit.also) == sorted(others)
    assert any(hit.also for hit in grouped) and not any(hit.also for hit in chunks)


def test_strategy_none_is_the_command_s_default(home: Path) -> None:
    assert ctxrag.search(QUERY, name="sample") == ctxrag.search(QUERY, name="sample", strategy=DEFAULT_STRATEGY, k=10)


def test_an_open_index_is_loaded_once_for_many_searches(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real_open = IndexStore.open

    def counting_open(self: IndexStore, name: str) -> Any:
        opened.append(name)
        return real_open(self, name)

    monkeypatch.setattr(IndexStore, "open", counting_open)
    index = ctxrag.open("sample")
    results = [
        index.search(query, k=3, strategy=strategy)
        for query in (QUERY, "priority queue")
        for strategy in ("hybrid", "vector")
    ]
    assert opened == ["sample"] and all(len(hits) == 3 for hits in results)
    assert index.search(QUERY, k=3, strategy="hybrid") == ctxrag.search(QUERY, name="sample", k=3, strategy="hybrid")
    assert index.version == IndexStore(home).manifest("sample")["version"] and "sample" in repr(index)


def test_a_long_lived_index_reads_its_chunks_lines_at_open_and_answers_as_a_fresh_one(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxrag.storage import tokenize
    from ctxrag.tasks.retrieval import matches, word_vectors

    vectors = word_vectors.packaged_word_vectors()
    assert vectors is not None
    monkeypatch.setattr(vectors, "_kept", {})
    tokenize.word_terms.cache_clear()
    service = ctxrag.open("sample", long_lived=True)
    contents = service._searcher.index.chunks["content"].to_pylist()
    words = {word for content in contents for word in tokenize.WORD.findall(content)}
    assert tokenize.word_terms.cache_info().currsize >= len(words)  # every word's terms worked out at open
    lines = [matches.meaning_text(line) for content in contents for line in content.split("\n") if line.strip()]
    assert set(lines) <= set(vectors._kept)  # and every line's word pieces
    queries = [(query, per_file) for query in (QUERY, "zanzibar quux") for per_file in (True, False)]
    answers = [service.search(query, k=5, per_file=per_file) for query, per_file in queries]
    monkeypatch.setattr(vectors, "_kept", {})
    tokenize.word_terms.cache_clear()
    fresh = ctxrag.open("sample")  # not long-lived: reads nothing at open, each chunk as a search meets it
    assert answers == [fresh.search(query, k=5, per_file=per_file) for query, per_file in queries]


MANY = [
    "backoff between two attempts",
    "priority of a task",
    "how do I install tinyq",
    "backoff between two attempts",
    "queue full error",
]


def test_search_many_embeds_once_and_equals_single_searches_on_a_fresh_home(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for copy in ("single", "many"):  # no query vector stored yet in either: each computes its own
        shutil.copytree(home, tmp_path / copy)
    monkeypatch.setenv("CTXRAG_HOME", str(tmp_path / "single"))
    singles = ctxrag.open("sample")
    expected = [singles.search(query, k=4) for query in MANY]
    monkeypatch.setenv("CTXRAG_HOME", str(tmp_path / "many"))
    many = ctxrag.open("sample")
    batches: list[list[str]] = []
    real_embed = many._searcher.embedder.embed
    monkeypatch.setattr(
        many._searcher.embedder,
        "embed",
        lambda texts, input_type="document": batches.append(texts) or real_embed(texts, input_type),
    )
    assert many.search_many(MANY, k=4) == expected
    queried = [batch for batch in batches if set(batch) & set(MANY)]  # (others: lines scored by meaning)
    assert queried == [sorted(dict.fromkeys(MANY), key=len, reverse=True)]  # the new queries, once each, in one batch
    assert many.search_many(MANY, k=4, strategy="bm25") == [
        singles.search(query, k=4, strategy="bm25") for query in MANY
    ]
    assert many.search_many([]) == [] and len([batch for batch in batches if set(batch) & set(MANY)]) == 1
    with pytest.raises(InvalidInput, match="k must be from 1 to 100, got 0"):
        many.search_many(MANY, k=0)


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda: ctxrag.search(QUERY, name="missing"), UnknownIndexError, "no index named 'missing'"),
        (lambda: ctxrag.open("missing"), UnknownIndexError, "no index named 'missing'"),
        (lambda: ctxrag.search(QUERY, name="sample", strategy="nonsense"), InvalidInput, "unknown strategy 'nonsense'"),
        (lambda: ctxrag.search(QUERY, name="sample", rerank="bogus"), InvalidInput, "unknown reranker 'bogus'"),
        (lambda: ctxrag.search(QUERY, name="sample", rerank="cohere"), MissingKey, "rerank cohere needs CO_API_KEY"),
        (
            lambda: ctxrag.search(QUERY, name="sample", rerank_modell="x"),
            InvalidInput,
            r"unknown field 'rerank_modell' \(did you mean rerank_model\?\)",
        ),
        (lambda: ctxrag.open("sample").search(QUERY, k=0), InvalidInput, "k must be from 1 to 100, got 0"),
        (lambda: ctxrag.evaluate(SAMPLE_QUESTIONS, name="missing"), UnknownIndexError, "no index named 'missing'"),
        (
            lambda: ctxrag.evaluate(SAMPLE_QUESTIONS, name="sample", strategy="nonsense"),
            InvalidInput,
            "unknown strategy",
        ),
    ],
    ids=[
        "search-missing",
        "open-missing",
        "strategy",
        "reranker",
        "key",
        "option",
        "k",
        "evaluate-missing",
        "evaluate-strategy",
    ],
)
def test_errors_are_raised_as_user_errors(home: Path, call: Any, kind: type[Exception], message: str) -> None:
    with pytest.raises(kind, match=message) as raised:
        call()
    assert isinstance(raised.value, ctxrag.UserError)


@pytest.mark.parametrize(
    ("source", "options", "message"),
    [
        (SAMPLE_CORPUS, {"name": "Bad Name"}, "invalid index name"),
        (SAMPLE_CORPUS, {"contextualiser": "none"}, "unknown option 'contextualiser'"),
        (SAMPLE_CORPUS, {"backend": "nope"}, "nope"),
        (SAMPLE_CORPUS, {"contextualizer": "nope"}, "nope"),
        (SAMPLE_CORPUS, {"embedder": "nope"}, "unknown embedder 'nope'"),
        (SAMPLE_CORPUS.parent / "missing", {}, "missing"),
    ],
    ids=["name", "option", "backend", "contextualizer", "embedder", "source"],
)
def test_bad_index_input_is_raised_before_any_flow_runs(
    home: Path, monkeypatch: pytest.MonkeyPatch, source: Path, options: dict[str, Any], message: str
) -> None:
    monkeypatch.setattr("ctxrag.runs.run_flow", lambda *args, **kwargs: pytest.fail("a flow ran"))
    with pytest.raises((UserError, OSError), match=message):
        ctxrag.index(source, **options)


def test_index_runs_the_command_s_flow_with_its_parameters(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxrag.flows.index import index_corpus

    runs: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr("ctxrag.tasks.embedding.embed.preload_local_model", lambda spec: None)
    monkeypatch.setattr(
        "ctxrag.runs.run_flow",
        lambda load, server, **parameters: runs.append((load(), parameters)) or blank(ctxrag.IndexReport),
    )
    assert (
        ctxrag.index(str(SAMPLE_CORPUS), name="other", contextualizer="none", gate=str(SAMPLE_QUESTIONS)).status
        == "ran"
    )
    assert ctxrag.index(SAMPLE_CORPUS, task_runner="threads").status == "ran"
    (flow, parameters), (with_runner, defaults) = runs
    assert flow.name == with_runner.name == index_corpus.name
    assert parameters["source"] == str(SAMPLE_CORPUS) and parameters["name"] == "other"
    assert parameters["options"] == IndexOptions(contextualizer="none", gate=GateOptions(evalset=str(SAMPLE_QUESTIONS)))
    assert defaults == {"source": str(SAMPLE_CORPUS), "name": "default", "options": IndexOptions(task_runner="threads")}


@pytest.mark.parametrize(
    ("server", "variable", "expected"),
    [
        (None, None, "temporary"),
        ("background", None, "background"),
        (None, "background", "background"),
        ("temporary", "background", "temporary"),
    ],
    ids=["default", "asked", "variable", "asked-over-variable"],
)
def test_index_and_evaluate_use_a_temporary_server_unless_asked(
    home: Path, monkeypatch: pytest.MonkeyPatch, server: str | None, variable: str | None, expected: str
) -> None:
    used: list[str] = []
    monkeypatch.setattr(
        "ctxrag.runs.run_flow",
        lambda load, server, **parameters: (
            used.append(server) or blank(ctxrag.IndexReport) | blank(ctxrag.EvaluateResult)
        ),
    )
    monkeypatch.delenv("CI", raising=False)
    if variable:
        monkeypatch.setenv("CTXRAG_PREFECT_SERVER", variable)
    else:
        monkeypatch.delenv("CTXRAG_PREFECT_SERVER", raising=False)
    ctxrag.index(SAMPLE_CORPUS, name="sample", server=server)  # type: ignore[arg-type]
    ctxrag.evaluate(SAMPLE_QUESTIONS, name="sample", server=server)  # type: ignore[arg-type]
    assert used == [expected, expected]


def test_an_unknown_server_is_a_user_error(home: Path) -> None:
    with pytest.raises(UserError, match="server='forever': expected one of background, temporary"):
        ctxrag.index(SAMPLE_CORPUS, name="sample", server="forever")  # type: ignore[arg-type]


SCRIPT = """
import sys, ctxrag
report = ctxrag.index(sys.argv[1], name="sample"{server})
print(report.status, flush=True)
if sys.argv[2] == "raise":
    raise RuntimeError("the program fails after indexing")
"""


@pytest.fixture(scope="module")
def script_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One CTXRAG_HOME for the scripts below: the first indexes, the next find the index unchanged."""
    return tmp_path_factory.mktemp("scripts") / "home"


@pytest.mark.slow  # a new process runs the index flow
@pytest.mark.parametrize(
    ("ending", "server", "left"),
    [("end", "", 0), ("raise", "", 0), ("end", ', server="background"', 1)],
    ids=["runs-to-its-end", "raises", "asked-for-background"],
)
def test_a_script_leaves_no_prefect_server_unless_it_asked_for_one(
    script_home: Path, tmp_path: Path, ending: str, server: str, left: int
) -> None:
    prefect_home = tmp_path / "prefect"
    env = user_env(script_home, prefect_home, PYTHONPATH=str(REPO))
    with stopped_afterwards(prefect_home):
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT.format(server=server), str(SAMPLE_CORPUS), ending],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )
        assert result.stdout.split()[:1] in (["published"], ["unchanged"]), result.stderr[-4000:]
        assert result.returncode == (1 if ending == "raise" else 0), result.stderr[-4000:]
        assert len(leftover_servers(tmp_path)) == left
    assert not leftover_servers(tmp_path)


def test_the_results_hold_every_key_of_the_command_s_reports(home: Path) -> None:
    from ctxrag.runs import run_evaluate, run_index
    from ctxrag.tasks.options import EvaluateOptions

    report = run_index(str(SAMPLE_CORPUS), "sample", IndexOptions(), "temporary")
    result = run_evaluate(
        str(SAMPLE_QUESTIONS), "sample", EvaluateOptions(k=5, strategy="bm25"), lambda message: None, "temporary"
    )
    assert ctxrag.IndexReport.from_dict(report).to_dict() == report
    assert ctxrag.EvaluateResult.from_dict(result).to_dict() == result
    assert isinstance(ctxrag.EvaluateResult.from_dict(result).run_dir, Path)


def test_index_again_reuses_everything(home: Path) -> None:
    report = ctxrag.index(SAMPLE_CORPUS, name="sample")
    assert report.status == "unchanged" and report.chunks_embedded == 0


def test_evaluate_scores_the_chosen_strategies_at_the_chosen_cut_offs(home: Path) -> None:
    result = ctxrag.evaluate(SAMPLE_QUESTIONS, name="sample", k=5, strategy=["bm25", "hybrid"])
    assert set(result.metrics) == {"bm25", "hybrid"}
    assert set(result.metrics["bm25"]) == {"pass@5", "hit@5", "ndcg@5"}
    assert 0 < result.metrics["hybrid"]["pass@5"] <= 1 and result.run_dir.is_dir() and result.chart.is_file()


def test_evaluate_issues_the_set_s_warnings(home: Path, tmp_path: Path) -> None:
    questions = tmp_path / "docs.json"
    questions.write_text(
        json.dumps(
            [
                {"question": "How long before a retry?", "correct_chunks": ["tinyq/retry.py#1"]},
                {"question": "Nobody knows", "correct_chunks": []},
            ]
        )
    )
    with pytest.warns(UserWarning, match="'correct_chunks' is empty; question skipped"):
        result = ctxrag.evaluate(questions, name="sample", strategy="bm25")
    assert result.queries == 1


def test_tune_with_too_few_questions_keeps_the_default_and_says_why(home: Path) -> None:
    record = ctxrag.tune("sample", SAMPLE_QUESTIONS)
    assert record is not None
    try:
        assert record.strategy is None and record.questions == 16 and record.cv is None
        assert record.reason == "16 questions are too few to choose on (30 or more needed): the default stays"
        assert IndexStore(home).tuning("sample") == record.to_dict()  # every key the index keeps is a field
        assert ctxrag.open("sample").strategy == DEFAULT_STRATEGY
    finally:
        assert ctxrag.tune("sample", reset=True) is None and IndexStore(home).tuning("sample") is None


def test_a_tuned_strategy_is_what_search_evaluate_and_open_use(home: Path) -> None:
    IndexStore(home).save_tuning("sample", {"strategy": {"strategy": "hybrid-score", "vector_weight": 0.3}})
    try:
        assert ctxrag.open("sample").strategy == "hybrid-score(vector_weight=0.3)"
        assert ctxrag.search(QUERY, name="sample") == ctxrag.search(
            QUERY, name="sample", strategy="hybrid-score(vector_weight=0.3)"
        )
        assert ctxrag.search(QUERY, name="sample") != ctxrag.search(QUERY, name="sample", strategy=DEFAULT_STRATEGY)
        result = ctxrag.evaluate(SAMPLE_QUESTIONS, name="sample", k=5)
        assert list(result.metrics)[-2:] == [
            "hybrid-score",
            "hybrid-score(vector_weight=0.3)",
        ]  # every strategy, then the index's
    finally:
        IndexStore(home).forget_tuning("sample")
    assert ctxrag.open("sample").strategy == DEFAULT_STRATEGY


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda: ctxrag.tune("missing", SAMPLE_QUESTIONS), UnknownIndexError, "no index named 'missing'"),
        (lambda: ctxrag.tune("sample"), InvalidInput, "tune needs an evaluation set"),
        (
            lambda: ctxrag.tune("sample", SAMPLE_QUESTIONS, metric="recall@3"),
            InvalidInput,
            "cannot tune on metric 'recall@3'",
        ),
        (
            lambda: ctxrag.search(QUERY, name="sample", strategy="hybrid(vector_weight=1)"),
            InvalidInput,
            "has no parameter 'vector_weight'",
        ),
    ],
    ids=["missing", "no-set", "metric", "parameter"],
)
def test_tune_errors_are_user_errors(home: Path, call: Any, kind: type[Exception], message: str) -> None:
    with pytest.raises(kind, match=message):
        call()
    assert IndexStore(home).tuning("sample") is None


def test_no_public_signature_or_result_field_says_any() -> None:
    import inspect

    from ctxrag import api

    calls = [getattr(api, name) for name in ("evaluate", "index", "open", "search", "tune")]
    calls += [api.Index.__init__, api.Index.search, api.Index.search_many]
    for call in calls:
        signature = inspect.signature(call)  # through keeps_host_state's wrapper
        written = [str(parameter.annotation) for parameter in signature.parameters.values()] + [
            str(signature.return_annotation)
        ]
        assert not [text for text in written if "Any" in text], call.__qualname__
    for kind in (ctxrag.Hit, ctxrag.Location, ctxrag.IndexReport, ctxrag.EvaluateResult, ctxrag.TuneResult):
        assert dataclasses.fields(kind) and not [
            item.name for item in dataclasses.fields(kind) if "Any" in str(item.type)
        ]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(kind.__new__(kind), dataclasses.fields(kind)[0].name, None)
    assert (Path(api.__file__).parent / "py.typed").is_file()


@pytest.mark.slow  # a new process
def test_import_ctxrag_loads_the_api_on_first_use() -> None:
    """A new process: which modules ``import ctxrag`` loads can only be seen in one that has imported nothing yet."""
    code = (
        "import json, sys, ctxrag; before = {m: m in sys.modules for m in ('ctxrag.api', 'prefect')}; "
        "search = ctxrag.search; namespace = {}; exec('from ctxrag import *', namespace); "
        "print(json.dumps({'before': before, 'api': 'ctxrag.api' in sys.modules, 'star': sorted(n for n in namespace if n != '__builtins__'),"
        " 'same': search is sys.modules['ctxrag.api'].search}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["before"] == {"ctxrag.api": False, "prefect": False} and seen["api"] and seen["same"]
    assert seen["star"] == [
        "EvaluateResult",
        "Hit",
        "Index",
        "IndexReport",
        "Location",
        "SearchAnswer",
        "SearchRequest",
        "TuneResult",
        "UserError",
        "evaluate",
        "index",
        "search",
        "tune",
    ]  # not open: the builtin stays
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ctxrag.nope  # noqa: B018

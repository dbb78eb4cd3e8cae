"""The ``ctxrag`` command: index, search, evaluate, list, delete. Results on stdout; progress and logs on stderr."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from contextlib import contextmanager
from typing import Iterator, Optional

import storage.environment  # noqa: F401  (offline, telemetry-off defaults before Prefect is imported)
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ctxrag.prefect_commands import register as register_prefect_commands
from ctxrag.tables import metrics_table
from ctxrag.prefect_commands.local_server import local_prefect_server
from ctxrag.prefect_commands.server_commands import announce_started
from storage.environment import ctxrag_home
from storage.errors import UserError
from storage.index_store import IndexStore
from storage.ledger import Ledger
from tasks.embedder_spec import DEFAULT_MAX_SEQ_LENGTH, LOCAL_WINDOW_TOKENS, EmbedderSpec
from tasks.search import DEFAULT_STRATEGY
from tasks.claude.contextualizer import DEFAULT_CONCURRENCY
from tasks.load import DEFAULT_MAX_FILE_BYTES
from storage.secrets import MissingKey, redact

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # plain tracebacks for unexpected errors; never locals (they can hold secrets)
    help="Contextual Retrieval as a Prefect workflow.",
)
out = Console()
err = Console(stderr=True)

# Errors the user can act on: shown as one line (`error: ...`, exit code 2). Anything else is a bug in ctxrag and
# keeps its traceback. A new user-facing error subclasses storage.errors.UserError; it is not listed here.
USER_ERRORS: tuple[type[BaseException], ...] = (
    UserError,
    OSError,  # permission denied, disk full, a missing file: the message names the file
)
_ELASTICSEARCH_ERRORS = (("elastic_transport", "ApiError"), ("elastic_transport", "TransportError"))

NameOption = typer.Option("default", "--name", help="Index name: lowercase letters, digits, '-' and '_'.")


class _NoTracebackForUserErrors(logging.Filter):
    """Prefect logs a failed task's traceback; for bad input the one-line message is the whole story."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and _user_message(record.exc_info[1]) is not None:
            record.exc_info = None
            record.exc_text = None
        return True


def _quiet_tracebacks() -> None:
    """Configure Prefect's logging now (later runs only update it) and filter its console handlers."""
    from prefect.logging.configuration import setup_logging

    setup_logging()
    loggers = [logging.getLogger()] + [
        logger for name, logger in logging.Logger.manager.loggerDict.items()
        if name.startswith("prefect") and isinstance(logger, logging.Logger)
    ]
    for handler in {handler for logger in loggers for handler in logger.handlers}:
        handler.addFilter(_NoTracebackForUserErrors())


def _loaded(module: str, name: str) -> type[BaseException] | None:
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _user_message(error: BaseException) -> str | None:
    """The one line to show for an error the user can act on; None for a bug in ctxrag (it keeps its traceback)."""
    if isinstance(error, (typer.Exit, typer.Abort)):
        return None
    elasticsearch = tuple(kind for kind in (_loaded(*name) for name in _ELASTICSEARCH_ERRORS) if kind)
    if elasticsearch and isinstance(error, elasticsearch):
        from storage.elasticsearch import describe_error

        return describe_error(error)  # type: ignore[arg-type]
    if isinstance(error, OSError) and not isinstance(error, UserError):
        if error.filename is None:
            return redact(str(error) or type(error).__name__)
        where = str(error.filename) + (f" -> {error.filename2}" if error.filename2 is not None else "")
        return redact(f"{where}: {error.strerror or error}")
    if isinstance(error, USER_ERRORS):
        return redact(str(error) or type(error).__name__)
    return None


def _fail(message: str) -> None:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


@contextmanager
def _user_errors() -> Iterator[None]:
    """A user error raised in the block becomes one line on stderr and exit code 2; anything else propagates."""
    try:
        yield
    except Exception as error:
        message = _user_message(error)
        if message is None:
            raise
        _fail(message)


def _run(flow, **parameters):  # type: ignore[no-untyped-def]
    """Run a flow against the reused local Prefect server (or the configured one); a user error becomes one line
    on stderr and exit code 2."""
    _quiet_tracebacks()
    with _user_errors(), local_prefect_server(announce=announce_started):
        return flow(**parameters)


def _check_index_input(source: str, name: str, contextualizer: str, backend: str) -> None:
    """What ``index`` can check without Prefect: the name, the choices, and the source (a JSON corpus is read and
    validated in full, which takes well under a second; a folder must exist)."""
    from pathlib import Path

    from storage.backends import backend_for
    from storage.names import validate_name
    from tasks.contextualize import ContextualizerKind
    from tasks.load import load_source

    validate_name(name)
    backend_for(backend)
    ContextualizerKind.from_str(contextualizer)
    path = Path(source)
    if path.is_file():
        load_source(source)
    elif not path.is_dir():
        load_source(source)  # names what is missing, as the flow would


def _parse_ks(values: Optional[list[str]]) -> Optional[list[int]]:
    if not values:
        return None
    try:
        return [int(part) for value in values for part in value.split(",") if part.strip()]
    except ValueError:
        _fail(f"--k takes whole numbers, e.g. --k 5,10,20 (got {' '.join(values)})")
        return None


@app.command()
def index(
    source: str = typer.Argument(..., help="A cookbook/docs JSON corpus, or a folder of code, Markdown and text."),
    name: str = NameOption,
    contextualizer: str = typer.Option("structural", help="structural (offline, no LLM), none, claude, claude-summary."),
    max_seq_length: int = typer.Option(DEFAULT_MAX_SEQ_LENGTH, help="Local embedding model's max word pieces per chunk."),
    window_tokens: int = typer.Option(LOCAL_WINDOW_TOKENS, min=0, help="Local model: embed a chunk as windows of this many word pieces and average them (0: the whole text, cut at --max-seq-length)."),
    backend: str = typer.Option("embedded", help="embedded (offline) or elasticsearch (ELASTICSEARCH_URL)."),
    embedder: str = typer.Option("local", help="local (MiniLM shipped in a package, offline), voyage or voyage-context-3 (each chunk with its document; VOYAGE_API_KEY)."),
    embedding_model: Optional[str] = typer.Option(None, help="Voyage model (default voyage-2; voyage-3.5, voyage-code-3, ...)."),
    output_dimension: Optional[int] = typer.Option(None, help="Voyage output dimension, where the model supports it."),
    model: str = typer.Option("claude-haiku-4-5", help="Claude model (claude contextualizers)."),
    claude_mode: str = typer.Option("per-chunk", help="per-chunk (the cookbook's), per-document (one call, many contexts), batch (per-chunk via Message Batches, half price), per-document-batch (per-document via Message Batches)."),
    cache_ttl: str = typer.Option("5m", help="Prompt-cache TTL: 5m or 1h."),
    concurrency: int = typer.Option(DEFAULT_CONCURRENCY, min=1, help="Claude requests open at once in the whole run (all documents; per process under Dask)."),
    rpm: Optional[float] = typer.Option(None, help="Client-side limit: Claude requests per minute."),
    tpm: Optional[float] = typer.Option(None, help="Client-side limit: Claude input tokens per minute (estimated)."),
    corpus_description: str = typer.Option("a document collection", help="What the corpus is (summary prompt)."),
    task_runner: Optional[str] = typer.Option(None, help="threads (default) or dask (a local cluster, or CTXRAG_DASK_ADDRESS)."),
    gate: Optional[str] = typer.Option(None, "--gate", help="Evaluation set: refuse a new version scoring worse than the live one."),
    gate_strategy: str = typer.Option(DEFAULT_STRATEGY, help="--gate: the strategy scored."),
    gate_metric: Optional[str] = typer.Option(None, help="--gate: the metric (default pass@10, or recall@3 for docs sets)."),
    gate_max_drop: float = typer.Option(0.02, help="--gate: the largest drop allowed (a fraction: 0.02 = 2 points)."),
    include: Optional[list[str]] = typer.Option(None, "--include", help="Folder SOURCE: load only paths matching this gitignore-style pattern (relative to SOURCE; repeatable)."),
    exclude: Optional[list[str]] = typer.Option(None, "--exclude", help="Folder SOURCE: skip paths matching this gitignore-style pattern, on top of .gitignore files (repeatable)."),
    max_file_bytes: int = typer.Option(DEFAULT_MAX_FILE_BYTES, min=0, help="Folder SOURCE: skip larger files, with a warning (0: no limit)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run report as JSON."),
    plan: bool = typer.Option(False, "--plan", help="Print what the run would pay for (every Claude mode, Voyage), and run nothing."),
) -> None:
    """Load, contextualize, embed and index SOURCE; the new index goes live only when complete."""
    claude = {
        "model": model, "mode": claude_mode, "cache_ttl": cache_ttl, "concurrency": concurrency,
        "requests_per_minute": rpm, "tokens_per_minute": tpm, "corpus_description": corpus_description,
    }
    with _user_errors():  # bad input fails here, in well under a second, before Prefect or a model is loaded
        spec = EmbedderSpec.choose(embedder, embedding_model, max_seq_length, output_dimension, window_tokens)  # checks them
        _check_index_input(source, name, contextualizer, backend)
        if plan:  # plain Python: no Prefect server, no flow, no paid call
            from ctxrag.plan_view import show_plan

            return show_plan(out, err, source, name, contextualizer, claude, spec, include, exclude, max_file_bytes, as_json)
    from flows.index import index_corpus
    from flows.runners import make_task_runner

    if task_runner:
        try:
            index_corpus = index_corpus.with_options(task_runner=make_task_runner(task_runner))
        except ValueError as error:
            _fail(str(error))

    report = _run(
        index_corpus, source=source, name=name, contextualizer=contextualizer, max_seq_length=max_seq_length,
        window_tokens=window_tokens,
        claude=claude if contextualizer.startswith("claude") else None,
        embedder=embedder, embedding_model=embedding_model, output_dimension=output_dimension, backend=backend,
        gate_evalset=gate, gate_strategy=gate_strategy, gate_metric=gate_metric, gate_max_drop=gate_max_drop,
        include=include or None, exclude=exclude or None, max_file_bytes=max_file_bytes,
    )
    if as_json:
        print(json.dumps(report))
        return
    for warning in report["warnings"]:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    table = Table(title=f"index {name!r}: {report['status']} (version {report['version']})")
    table.add_column("item")
    table.add_column("value", justify="right")
    for key, value in report.items():
        if key not in {"index", "version", "status"} and not isinstance(value, (dict, list, type(None))):
            table.add_row(key.replace("_", " "), str(value))
    table.add_row("warnings", str(len(report["warnings"])))
    table.add_row("seconds", ", ".join(f"{stage} {value:.1f}" for stage, value in report["seconds"].items()))
    out.print(table)
    costs = report["contextualizer_calls"]
    if costs["calls"]:
        out.print(
            f"Claude: {costs['calls']} calls ({costs['failed_calls']} failed), {costs['cache_read_share']:.1%} of input "
            f"tokens read from cache, ${costs['cost_usd']:.4f} (without caching ${costs['cost_without_cache_usd']:.4f})",
            highlight=False,
        )
    if report["embedding_calls"]["calls"]:
        spent = report["embedding_calls"]
        out.print(f"Voyage: {spent['calls']} requests, {spent['input_tokens']:,} tokens, ${spent['cost_usd']:.4f}", highlight=False)
    if costs["calls"]:
        if costs["documents_without_caching"]:
            out.print(f"caching could not apply (below the model's minimum length) to {len(costs['documents_without_caching'])} documents: "
                      + ", ".join(costs["documents_without_caching"][:10]), highlight=False)


@app.command()
def search(
    query: str = typer.Argument(...),
    name: str = NameOption,
    strategy: str = typer.Option(DEFAULT_STRATEGY, help="hybrid-doc (the default: BM25 first, the vector side votes for documents, a chunk defining a name you mention rises), hybrid (RRF), hybrid-weighted, bm25 or vector."),
    k: int = typer.Option(10, "-k", "--k", min=1),
    rerank: str = typer.Option("none", help="cohere (CO_API_KEY), claude (ANTHROPIC_API_KEY), local:PATH or none."),
    rerank_model: str = typer.Option("", help="Reranker model (cohere: rerank-english-v3.0; claude: claude-haiku-4-5)."),
    server_rrf: bool = typer.Option(False, "--server-rrf", help="Elasticsearch backend: fuse hybrid with the cluster's rrf retriever."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Search an index (no Prefect run: answers in milliseconds)."""
    from tasks.rerank import RerankSpec
    from tasks.search import Searcher, Strategy

    with _user_errors():
        spec = RerankSpec.from_str(rerank, rerank_model)
        if spec and (variable := spec.missing_key()):
            raise MissingKey(f"--rerank {rerank} needs {variable}")
        home = ctxrag_home()
        ledger, run_id = Ledger(home).append, f"search-{uuid.uuid4().hex[:12]}"  # paid query embeddings and reranks
        searcher = Searcher(IndexStore(home).open(name), server_rrf=server_rrf, home=home, ledger=ledger, run_id=run_id)
        hits = searcher.search(query, Strategy.from_str(strategy), k, spec.build(ledger, run_id) if spec else None)
    chunks = searcher.index.chunks
    rows = [
        {
            "rank": rank,
            "chunk_id": chunks["chunk_id"][hit.row].as_py(),
            "doc_id": chunks["doc_id"][hit.row].as_py(),
            "chunk_index": chunks["chunk_index"][hit.row].as_py(),
            "score": round(hit.score, 6),
            "found_by": hit.found_by,
            "context": chunks["context"][hit.row].as_py(),
            "content": chunks["content"][hit.row].as_py(),
        }
        for rank, hit in enumerate(hits, start=1)
    ]
    if as_json:
        print(json.dumps(rows))
        return
    for row in rows:
        out.print(f"[bold]{row['rank']}. {escape(str(row['chunk_id']))}[/]  score {row['score']:.4f}  found by {', '.join(row['found_by'])}", highlight=False)
        snippet = " ".join(str(row["content"]).split())[:240]
        out.print(f"   {snippet}", highlight=False, markup=False)


@app.command()
def evaluate(
    evalset: str = typer.Argument(..., help="Cookbook JSONL (Pass@k) or docs JSON (precision/recall/F1/MRR)."),
    name: str = NameOption,
    k: Optional[list[str]] = typer.Option(None, "--k", help="Cut-offs, e.g. --k 5,10,20 (default: 5,10,20 for JSONL, 3 for docs)."),
    strategy: Optional[list[str]] = typer.Option(None, "--strategy", help="Repeatable; default: every strategy."),
    rerank: str = typer.Option("none", help="Add <strategy>+rerank-<provider> rows: cohere, claude, local:PATH."),
    rerank_model: str = typer.Option("", help="Reranker model."),
    end_to_end: bool = typer.Option(False, "--end-to-end", help="Add accuracy: Claude answers, a Claude judge grades."),
    answer_model: str = typer.Option("claude-haiku-4-5", help="--end-to-end: the answering model."),
    judge_model: str = typer.Option("claude-sonnet-4-5", help="--end-to-end: the judging model."),
    subject: str = typer.Option("the indexed documents", help="--end-to-end: what the questions are about (judge prompt)."),
    server_rrf: bool = typer.Option(False, "--server-rrf", help="Elasticsearch backend: hybrid fused by the cluster's rrf retriever."),
    as_json: bool = typer.Option(False, "--json", help="Print only {strategy: {metric: value}} as JSON."),
) -> None:
    """Evaluate the index's search strategies on EVALSET; writes a chart and per-query results."""
    from tasks.evalset import load_evalset
    from tasks.search import Strategy

    with _user_errors():  # bad input fails here, before Prefect starts; the flow loads the set again
        for warning in load_evalset(evalset).warnings:  # its warnings (skipped questions) are printed here
            err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
        store = IndexStore(ctxrag_home())
        if store.live_version(name) is None:
            store.open(name)  # raises UnknownIndexError, naming the indexes there are
        for value in strategy or []:
            Strategy.from_str(value)
    from flows.evaluate import evaluate_index
    result = _run(
        evaluate_index, evalset=evalset, name=name, ks=_parse_ks(k), strategies=strategy or None, rerank=rerank,
        rerank_model=rerank_model, end_to_end=end_to_end, answer_model=answer_model, judge_model=judge_model, subject=subject,
        server_rrf=server_rrf,
    )
    if result["missing_golden"]:
        err.print(f"[yellow]warning:[/] {len(result['missing_golden'])} golden chunks are not in the index (scored as misses)")
    for row_name, reason in result["unavailable"].items():
        err.print(f"note: {row_name} not computed: {reason}" + (" (left out of the JSON)" if as_json else ""), highlight=False)
    for row_name, count in result["unparseable_judgements"].items():
        if count:
            err.print(f"note: {row_name}: {count} judgements could not be parsed; accuracy is over the rest", highlight=False)
    for row_name, count in result["rerank_fallbacks"].items():
        if count:
            err.print(f"note: {row_name}: Claude's indices were unusable for {count} queries; original order used", highlight=False)
    if as_json:
        print(json.dumps(result["metrics"]))
        return
    metrics = result["metrics"]
    names = list(dict.fromkeys(metric for values in metrics.values() for metric in values))
    if "accuracy" in result["unavailable"] and "accuracy" not in names:
        names.append("accuracy")
    out.print(metrics_table(out, f"{result['queries']} queries on index {name!r}", metrics, names, result["unavailable"]))
    spent = result["paid_calls"]
    if spent["calls"]:
        out.print(f"paid calls: {spent['calls']} ({spent['failed_calls']} failed), ${spent['cost_usd']:.4f}", highlight=False)
    err.print(f"chart: {result['chart']}\nper-query results: {result['run_dir']}", highlight=False)


@app.command("list")
def list_indexes() -> None:
    """List the indexes under $CTXRAG_HOME."""
    store = IndexStore(ctxrag_home())
    with _user_errors():
        listed = [(index_name, store.manifest(index_name) or {}) for index_name in store.names()]
    for index_name, manifest in listed:
        counts = manifest.get("counts", {})
        config = manifest.get("config", {})
        print(
            f"{index_name}\t{counts.get('documents')} documents\t{counts.get('chunks')} chunks\t"
            f"{config.get('contextualizer', {}).get('name')}\t{manifest.get('created_at')}\t{manifest.get('source')}"
        )


@app.command()
def delete(name: str = typer.Argument(...)) -> None:
    """Delete an index, and its Elasticsearch alias and indexes if it lives there (stored contexts and embeddings stay cached)."""
    with _user_errors():
        deleted = IndexStore(ctxrag_home()).delete(name)
    if not deleted:
        _fail(f"no index named {name!r}")
    err.print(f"deleted index {name!r}")


@app.command()
def gc(
    include_paid: bool = typer.Option(False, "--include-paid", help="Also remove paid results (Claude contexts, Voyage vectors) no index uses."),
    paid_older_than: Optional[float] = typer.Option(None, "--paid-older-than", min=0, help="Also remove paid results no index uses, older than DAYS."),
) -> None:
    """Remove stored contexts and embeddings that no kept index version references; paid ones stay unless asked."""
    from tasks.gc import collect_garbage

    with _user_errors():
        IndexStore(ctxrag_home()).check_manifests()  # a corrupt one fails here, named (gc would not name it)
        report = collect_garbage(ctxrag_home(), include_paid=include_paid, paid_older_than_days=paid_older_than)
    for table in ("contexts", "embeddings"):
        if report[f"{table}_kept_paid"]:
            err.print(f"kept {report[f'{table}_kept_paid']} paid {table} no index uses (paid for; "
                      "--include-paid or --paid-older-than DAYS removes them)", highlight=False)
    print(json.dumps(report))


def main() -> None:
    app()


register_prefect_commands(app)  # serve, deploy, trigger (ctxrag.prefect_commands)


if __name__ == "__main__":
    sys.exit(main())

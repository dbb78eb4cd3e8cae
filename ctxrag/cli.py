"""The ``ctxrag`` command: index, search, evaluate, list, inspect, delete (and the services: mcp, serve-search). Results on stdout; progress and logs on stderr."""

from __future__ import annotations

import json
import os

import typer
from rich.markup import escape
from rich.table import Table

from ctxrag import cli_help  # noqa: F401  (flags shown as flags in --help)
from ctxrag.cli_options import with_options, with_request
from ctxrag.config_command import register as register_config_command
from ctxrag.errors import fail, user_errors
from ctxrag.inspect_command import inspect
from ctxrag.prefect_commands import register as register_prefect_commands
from ctxrag.service_commands import register as register_service_commands
from ctxrag.storage.environment import apply_offline_defaults, apply_private_umask, ctxrag_home
from ctxrag.tasks.common.display import console, figure
from ctxrag.tasks.common.search_request import SearchRequest
from ctxrag.tasks.options import DEFAULT_NAME, EvaluateOptions, IndexOptions

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # plain tracebacks for unexpected errors; never locals (they can hold secrets)
    help="Contextual Retrieval as a Prefect workflow.",
)
out = console()
err = console(stderr=True)

# The defaults of every option: ctxrag.tasks.options, read by the flows and the Python API too.
INDEX, SEARCH, EVALUATE = IndexOptions(), SearchRequest(query="-"), EvaluateOptions()
NameOption = typer.Option(DEFAULT_NAME, "--name", help="Index name: lowercase letters, digits, '-' and '_'.")


def _warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False)


def _parse_ks(values: list[str] | None) -> list[int] | None:
    if not values:
        return None
    try:
        return [int(part) for value in values for part in value.split(",") if part.strip()]
    except ValueError:
        fail(f"--k takes whole numbers, e.g. --k 5,10,20 (got {' '.join(values)})")
        return None


def _show_plan(source: str, name: str, options: IndexOptions, as_json: bool) -> None:
    """``index --plan``: what the run would pay for, checked and computed without Prefect."""
    from ctxrag.cost_plan_view import show_plan
    from ctxrag.runs import check_index_input

    check_index_input(source, name, options)
    show_plan(out, err, source, name, options, as_json)


@app.command()
@with_options(IndexOptions, checked=lambda: user_errors())
def index(
    source: str = typer.Argument(..., help="A cookbook/docs JSON corpus, or a folder of code, Markdown and text."),
    name: str = NameOption,
    as_json: bool = typer.Option(False, "--json", help="Print the run report as JSON."),
    plan: bool = typer.Option(
        False, "--plan", help="Print what the run would pay for (every Claude mode, Voyage), and run nothing."
    ),
    watch: bool = typer.Option(
        False,
        "--watch",
        help="After the run, watch SOURCE: each saved change is indexed (only what changed) until Ctrl-C.",
    ),
    options: IndexOptions = INDEX,
) -> None:
    """Load, contextualize, embed and index SOURCE; the new index goes live only when complete."""
    from ctxrag.index_view import show_report

    with user_errors():  # bad input fails in well under a second, before Prefect or a model is loaded
        if plan and watch:
            fail("--plan runs nothing and --watch runs on every change: choose one")
        if plan:  # plain Python: no Prefect server, no flow, no paid call
            return _show_plan(source, name, options, as_json)
        if watch:
            from ctxrag.index_view import Watching
            from ctxrag.watch import watch_index

            shown = Watching(out, err, source, name, as_json)
            return watch_index(source, name, options, shown.report, note=shown.note, failed=shown.failed)
        from ctxrag.runs import run_index

        report = run_index(source, name, options)
    show_report(out, err, report, name, as_json)


@app.command()
@with_request(SearchRequest, checked=lambda: user_errors())
def search(
    as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON: index, version, strategy and hits."),
    request: SearchRequest = SEARCH,
) -> None:
    """Search an index (no Prefect run: answers in milliseconds; later searches of the home ask a resident search
    process, see $CTXRAG_SEARCH_IDLE_MINUTES)."""
    from ctxrag.services import resident_socket as resident

    home = ctxrag_home()
    resident_at = None if request.server_rrf else resident.socket_path(home)
    answer = resident.ask(resident_at, request)
    if answer is None:
        from ctxrag.searching import answer as search_here

        with user_errors():
            answer = search_here(request)
        resident.start(resident_at, home, request.index, after=os.getpid())
    if as_json:
        print(json.dumps(answer.to_dict()))
        return
    from ctxrag.hits_view import show_answer

    show_answer(out, answer)


@app.command()
def evaluate(
    evalset: str = typer.Argument(..., help="Cookbook JSONL (Pass@k) or docs JSON (precision/recall/F1/MRR)."),
    name: str = NameOption,
    k: list[str] | None = typer.Option(
        None, "--k", help="Cut-offs, e.g. --k 5,10,20 (default: 5,10,20 for JSONL, 3 for docs)."
    ),
    strategy: list[str] | None = typer.Option(
        None,
        "--strategy",
        help="Repeatable, as search's --strategy; default: every strategy, and the index's tuned one.",
    ),
    rerank: str = typer.Option(
        EVALUATE.rerank,
        help="Add <strategy>+rerank-<provider> rows: cohere, claude, local:MODEL (a cross-encoder folder or id).",
    ),
    rerank_model: str = typer.Option(EVALUATE.rerank_model, help="Reranker model."),
    end_to_end: bool = typer.Option(
        EVALUATE.end_to_end, "--end-to-end", help="Add accuracy: Claude answers, a Claude judge grades."
    ),
    answer_model: str = typer.Option(EVALUATE.answer_model, help="--end-to-end: the answering model."),
    judge_model: str = typer.Option(EVALUATE.judge_model, help="--end-to-end: the judging model."),
    subject: str = typer.Option(EVALUATE.subject, help="--end-to-end: what the questions are about (judge prompt)."),
    server_rrf: bool = typer.Option(
        EVALUATE.server_rrf, "--server-rrf", help="Elasticsearch backend: hybrid fused by the cluster's rrf retriever."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print only {strategy: {metric: value}} as JSON."),
) -> None:
    """Evaluate the index's search strategies on EVALSET; writes a chart and per-query results."""
    with user_errors():  # bad input fails before Prefect starts; the set's warnings (skipped questions) print first
        options = EvaluateOptions(
            k=_parse_ks(k),
            strategy=strategy or None,
            rerank=rerank,
            rerank_model=rerank_model,
            end_to_end=end_to_end,
            answer_model=answer_model,
            judge_model=judge_model,
            subject=subject,
            server_rrf=server_rrf,
        )
        from ctxrag.runs import run_evaluate

        result = run_evaluate(evalset, name, options, warn=_warn)
    if result["missing_golden"]:
        _warn(f"{len(result['missing_golden'])} golden chunks are not in the index (scored as misses)")
    for row_name, reason in result["unavailable"].items():
        err.print(
            f"note: {row_name} not computed: {reason}" + (" (left out of the JSON)" if as_json else ""), highlight=False
        )
    for row_name, count in result["unparseable_judgements"].items():
        if count:
            err.print(
                f"note: {row_name}: {count} judgements could not be parsed; accuracy is over the rest", highlight=False
            )
    for row_name, count in result["rerank_fallbacks"].items():
        if count:
            err.print(
                f"note: {row_name}: Claude's indices were unusable for {count} queries; original order used",
                highlight=False,
            )
    if as_json:
        print(json.dumps(result["metrics"]))
        return
    from ctxrag.tables import metrics_table

    metrics = result["metrics"]
    names = list(dict.fromkeys(metric for values in metrics.values() for metric in values))
    if "accuracy" in result["unavailable"] and "accuracy" not in names:
        names.append("accuracy")
    out.print(
        metrics_table(out, f"{result['queries']} queries on index {name!r}", metrics, names, result["unavailable"])
    )
    spent = result["paid_calls"]
    if spent["calls"]:
        out.print(
            f"paid calls: {spent['calls']} ({spent['failed_calls']} failed), ${figure(spent['cost_usd'], 'cost_usd')}",
            highlight=False,
        )
    err.print(f"chart: {result['chart']}\nper-query results: {result['run_dir']}", highlight=False)


@app.command("list")
def list_indexes(
    as_json: bool = typer.Option(False, "--json", help="Print the indexes as a JSON list of objects."),
) -> None:
    """List the indexes under $CTXRAG_HOME: documents, chunks, contextualizer, search strategy, created, source."""
    from ctxrag.listing import index_listing

    home = ctxrag_home()
    with user_errors():
        listed = index_listing(home)
    if as_json:
        print(json.dumps(listed))
        return
    if not listed:
        err.print(f"no indexes in {home.resolve()} (CTXRAG_HOME); `ctxrag index SOURCE --name NAME` builds one")
        return
    print("name\tdocuments\tchunks\tcontextualizer\tstrategy\tcreated\tsource")
    for entry in listed:
        how = "tuned" if entry["tuned"] else "default"
        print(
            f"{entry['name']}\t{entry['documents']}\t{entry['chunks']}\t{entry['contextualizer']}\t"
            f"{entry['strategy']} ({how})\t{entry['created_at']}\t{entry['source']}"
        )


@app.command()
def tune(
    name: str = typer.Argument(..., help="The index."),
    evalset: str | None = typer.Argument(None, help="Your questions, in either evaluation format (30 or more)."),
    metric: str | None = typer.Option(
        None, help="What to maximize, e.g. pass@10 (default for Pass@k sets), mrr@10 (default for docs sets), recall@5."
    ),
    reset: bool = typer.Option(False, "--reset", help="Forget the index's choice: search goes back to the default."),
    as_json: bool = typer.Option(False, "--json", help="Print what the index keeps as JSON."),
) -> None:
    """Choose the index's search strategy on your questions (cross-validated by document); search, evaluate and --gate use it."""
    from ctxrag.api import forget_tuning
    from ctxrag.api import tune as tune_index

    with user_errors():
        if reset:
            print(json.dumps({"forgot": forget_tuning(name)}))
            return
        kept = tune_index(name, evalset, metric=metric)
    assert kept is not None
    if as_json:
        print(json.dumps(kept.to_dict()))
        return
    table = Table(
        title=f"{kept.questions} questions on index {name!r}, {kept.documents} documents: {kept.metric} on all of them"
    )
    table.add_column("strategy")
    table.add_column(kept.metric, justify="right")
    for label, value in sorted(kept.scores.items(), key=lambda item: -item[1]):
        table.add_row(label, figure(value, kept.metric))
    out.print(table)
    if kept.cv is not None:
        out.print(
            f"held out ({kept.folds} folds by document): {figure(kept.cv, kept.metric)}; picks: {', '.join(kept.fold_picks)}",
            highlight=False,
        )
    out.print(
        f"index {name!r} searches with {kept.label or 'the default'}: {kept.reason}", highlight=False, markup=False
    )


@app.command()
def delete(name: str = typer.Argument(...)) -> None:
    """Delete an index, and its Elasticsearch alias and indexes if it lives there (stored contexts and embeddings stay cached)."""
    from ctxrag.storage.index_store import IndexStore

    with user_errors():
        deleted = IndexStore(ctxrag_home()).delete(name)
    if not deleted:
        fail(f"no index named {name!r} in {ctxrag_home().resolve()}")
    out.print(f"deleted index {name!r}", highlight=False)


@app.command()
def gc(
    include_paid: bool = typer.Option(
        False, "--include-paid", help="Also remove paid results (Claude contexts, Voyage vectors) no index uses."
    ),
    paid_older_than: float | None = typer.Option(
        None, "--paid-older-than", min=0, help="Also remove paid results no index uses, older than DAYS."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the counts kept and removed, and bytes_freed, as one JSON object."
    ),
) -> None:
    """Remove stored contexts, embeddings and query vectors that no kept index version references; paid ones stay unless asked."""
    from ctxrag.storage.index_store import IndexStore
    from ctxrag.tasks.gc import TABLES, collect_garbage

    with user_errors():
        IndexStore(ctxrag_home()).check_manifests()  # a corrupt one fails here, named (gc would not name it)
        report = collect_garbage(ctxrag_home(), include_paid=include_paid, paid_older_than_days=paid_older_than)
    for table in TABLES:
        if report[f"{table}_kept_paid"]:
            err.print(
                f"kept {report[f'{table}_kept_paid']} paid {table} no index uses (paid for; "
                "--include-paid or --paid-older-than DAYS removes them)",
                highlight=False,
            )
    if as_json:
        print(json.dumps(report))
        return
    removed = ", ".join(f"{report[f'{table}_removed']:,} {table}" for table in TABLES)
    kept = ", ".join(f"{report[f'{table}_kept']:,} {table}" for table in TABLES)
    out.print(f"removed {removed} no index uses, freeing {_size(report['bytes_freed'])}; kept {kept}", highlight=False)


def _size(count: int) -> str:
    """Bytes as people read them: 512 bytes, 3.4 MB, 1.2 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:,} bytes"


def main() -> None:
    """The ``ctxrag`` command: its process defaults (telemetry off, offline; ``apply_offline_defaults``; umask 077,
    ``apply_private_umask``) are set here, for this process only, before Prefect or a model is imported."""
    apply_offline_defaults()
    apply_private_umask()
    app()


register_prefect_commands(app)  # serve, deploy, trigger (ctxrag.prefect_commands)
register_service_commands(app)  # mcp, serve-search (ctxrag.service_commands)
register_config_command(app)  # config, and the settings' check before every command (ctxrag.config_command)
app.command("inspect")(inspect)


if __name__ == "__main__":
    main()

"""The run report of an index run: a dict (the flow's result, ``--json``), a summary table artifact, a costs
artifact when Claude was paid, and one log line."""

from __future__ import annotations

from prefect import get_run_logger
from prefect.artifacts import create_table_artifact

from ctxrag.tasks.common.display import figure, readable_rows
from ctxrag.tasks.common.languages import chunked_by_regex, chunks_by_language, read_as_plain_text
from ctxrag.tasks.common.models import Corpus
from ctxrag.tasks.stages.contextualize import Contexts
from ctxrag.tasks.stages.embed import Vectors
from ctxrag.tasks.stages.publish import BuildPlan, Published
from ctxrag.tasks.stages.run import IndexRun

SUMMARY_PARTS = {
    "contextualizer_calls": ("calls", "cost_usd"),
    "embedding_calls": ("calls", "cost_usd"),  # the rest: costs artifact
    "read_as_plain_text": ("files",),
    "chunked_by_regex": ("files",),
}  # the names: in the JSON report


def report_run(
    run: IndexRun,
    corpus: Corpus,
    changes: dict[str, int],
    contexts: Contexts,
    plan: BuildPlan,
    vectors: Vectors,
    published: Published,
) -> dict[str, object]:
    """The report, also written as the run's artifacts and log line."""
    report: dict[str, object] = {
        "index": run.name,
        "version": published.version,
        "status": published.status,
        "documents": len(corpus.documents),
        **{f"documents_{change}": changes[change] for change in ("new", "changed", "unchanged", "removed")},
        "chunks": len(corpus.chunks),
        "chunks_by_language": chunks_by_language(corpus),
        "read_as_plain_text": read_as_plain_text(corpus),
        "chunked_by_regex": chunked_by_regex(corpus),
        "documents_contextualized": contexts.documents_contextualized,
        "chunks_contextualized": contexts.chunks_contextualized,
        "chunks_embedded": vectors.embedded,
        "chunks_embedding_reused": len(plan.chunks) - vectors.embedded,
        "contextualizer_calls": contexts.costs,
        "embedding_calls": vectors.costs,
        "gate": published.gate,
        "seconds": run.seconds,
        "warnings": corpus.warnings,
    }
    key = run.name.replace("_", "-")
    create_table_artifact(
        key=f"ctxrag-index-{key}", table=summary_rows(report), description=f"ctxrag index run for {run.name!r}"
    )
    get_run_logger().info(
        "ctxrag index %r: %s, version %s; %d documents, %d chunks (%d contextualized, %d embedded); %s",
        run.name,
        published.status,
        published.version,
        len(corpus.documents),
        len(corpus.chunks),
        contexts.chunks_contextualized,
        vectors.embedded,
        ", ".join(f"{stage} {figure(value, 'seconds')} s" for stage, value in run.seconds.items()),
    )
    if contexts.costs["calls"]:
        create_table_artifact(
            key=f"ctxrag-costs-{key}",
            table=readable_rows({"item": item, "value": value} for item, value in contexts.costs.items()),
            description=f"paid contextualizer calls of this run ({run.contextualizer.kind})",
        )
    return report


def summary_rows(report: dict[str, object]) -> list[dict[str, str]]:
    """The run report as (item, value) rows for people: nested values flattened (``seconds.embed``), figures rounded
    (``figure``), nothing left as ``None``."""
    rows = []
    for key, value in report.items():
        if value is None or isinstance(value, list):
            continue
        if isinstance(value, dict):
            wanted = SUMMARY_PARTS.get(key, tuple(value))
            rows += [
                {"item": f"{key}.{inner}", "value": figure(value[inner], f"{key}.{inner}")}
                for inner in wanted
                if inner in value
            ]
        else:
            rows.append({"item": key, "value": figure(value, key)})
    return rows

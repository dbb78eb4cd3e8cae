"""The ``evaluate`` flow: strategies x k over an evaluation set -> metrics table, chart, per-query results."""

from __future__ import annotations

import time
import uuid
from typing import Any
from pathlib import Path

import ctxrag.storage.environment  # noqa: F401  (before Prefect)
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE
from prefect.runtime import flow_run

from ctxrag.flows.options import DEFAULT_NAME, EvaluateOptions
from ctxrag.flows.runners import run_name
from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.environment import ctxrag_home
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.ledger import Ledger, summarize
from ctxrag.tasks.evaluation.evalset import EvalSet, load_evalset
from ctxrag.tasks.evaluation.answer import EndToEnd
from ctxrag.tasks.evaluation.evaluate import Evaluation, evaluate, require_golden_chunks
from ctxrag.tasks.common.display import readable_rows
from ctxrag.tasks.common.progress import stage_progress
from ctxrag.tasks.evaluation.report import chart_markdown, metrics_rows, write_chart, write_run
from ctxrag.tasks.retrieval.rerank import CrossEncoderReranker, RerankSpec
from ctxrag.tasks.retrieval.search import Searcher, Strategy, StrategyConfig, strategy_of


DEFAULTS = EvaluateOptions()


@task(cache_policy=NONE)
def load_evaluation_set(path: str) -> EvalSet:
    return load_evalset(path)


@task(cache_policy=NONE)
def run_evaluation(
    name: str,
    home: Path,
    evalset: EvalSet,
    strategies: list[StrategyConfig],
    ks: list[int],
    rerank: RerankSpec | None = None,
    end_to_end: dict[str, Any] | None = None,
    run_id: str = "",
    server_rrf: bool = False,
) -> Evaluation:
    ledger = Ledger(home).append
    searcher = Searcher(IndexStore(home).open(name), server_rrf=server_rrf, home=home, ledger=ledger, run_id=run_id)
    require_golden_chunks(searcher, evalset, name)  # before any query is embedded (paid with Voyage) or result saved
    searcher.prefetch([question.query for question in evalset.queries])
    rerankers = [rerank.build(ledger, run_id)] if rerank else []
    judge = EndToEnd(ledger=ledger, run_id=run_id, **end_to_end) if end_to_end is not None else None
    paid = bool(judge) or any(not isinstance(reranker, CrossEncoderReranker) for reranker in rerankers)
    with stage_progress("evaluating", "searches") as update:
        return evaluate(searcher, evalset, strategies, ks, progress=update, rerankers=rerankers, end_to_end=judge, workers=4 if paid else 1)


@task(cache_policy=NONE)
def save_evaluation(run_dir: Path, config: dict[str, object], result: Evaluation) -> Path:
    write_run(run_dir, config, result.metrics, result.per_query)
    return write_chart(result.metrics, run_dir / "chart.png", f"{config['index']}: {Path(str(config['evalset'])).name}")


def every_strategy(own: StrategyConfig) -> list[StrategyConfig]:
    """Each strategy at its defaults, then the index's own (``ctxrag tune``'s choice) if it is not one of them."""
    every = [StrategyConfig(strategy) for strategy in Strategy]
    return every + ([own] if own not in every else [])


@flow(name="ctxrag-evaluate", flow_run_name=run_name("evaluate"))
def evaluate_index(
    evalset: str,
    name: str = DEFAULT_NAME,
    ks: list[int] | None = None,
    strategies: list[str] | None = None,
    home: str | None = None,
    rerank: str = DEFAULTS.rerank,
    rerank_model: str = DEFAULTS.rerank_model,
    end_to_end: bool = DEFAULTS.end_to_end,
    answer_model: str = DEFAULTS.answer_model,
    judge_model: str = DEFAULTS.judge_model,
    subject: str = DEFAULTS.subject,
    server_rrf: bool = DEFAULTS.server_rrf,
) -> dict[str, object]:
    """Score every strategy (or the given ones) of index NAME on EVALSET; returns metrics and where results went.
    Every strategy includes the one ``ctxrag tune`` chose for the index, when it is not one of the others.

    ``rerank`` (cohere, claude, local:PATH) adds ``<strategy>+rerank-<provider>`` rows; ``end_to_end`` adds
    ``accuracy`` (Claude answers, a Claude judge grades). Rows or metrics whose key is not configured are listed
    under ``unavailable`` with the variable to set, never computed.
    """
    root = Path(home) if home else ctxrag_home()
    run_id = str(flow_run.id or uuid.uuid4())
    own = strategy_of(IndexStore(root), name)
    chosen = [StrategyConfig.from_str(value) for value in strategies] if strategies else every_strategy(own)
    questions = load_evaluation_set(evalset)
    ks = sorted(set(ks)) if ks else questions.format.default_ks
    if any(k < 1 for k in ks):
        raise InvalidInput(f"k must be at least 1, got {ks}")
    unavailable: dict[str, str] = {}
    rerank_spec = RerankSpec.from_str(rerank, rerank_model)
    if rerank_spec and (variable := rerank_spec.missing_key()):
        unavailable.update({f"{strategy.label}+{rerank_spec.label}": f"needs {variable}" for strategy in chosen})
        rerank_spec = None
    judge_settings = {"answer_model": answer_model, "judge_model": judge_model, "subject": subject} if end_to_end else None
    if judge_settings and RerankSpec("claude").missing_key():
        unavailable["accuracy"] = "needs ANTHROPIC_API_KEY"
        judge_settings = None
    result = run_evaluation(name, root, questions, chosen, ks, rerank_spec, judge_settings, run_id, server_rrf)
    if result.missing_golden:
        get_run_logger().warning(
            "%d golden chunks of %s are not in index %r and count as misses (first: %s)",
            len(result.missing_golden), Path(evalset).name, name, ", ".join(result.missing_golden[:3]),
        )
    run_dir = root / "runs" / f"evaluate-{name}-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**6:06d}"
    config: dict[str, object] = {
        "index": name,
        "index_manifest": IndexStore(root).manifest(name),
        "evalset": str(Path(evalset).resolve()),
        "format": questions.format.value,
        "ks": ks,
        "strategies": [strategy.label for strategy in chosen],
        "index_strategy": own.label,
        "rerank": {"provider": rerank, "model": rerank_model} if rerank != "none" else None,
        "end_to_end": judge_settings,
        "unavailable": unavailable,
    }
    chart = save_evaluation(run_dir, config, result)
    rows = readable_rows(metrics_rows(result.metrics))  # rounded for people; metrics.parquet and the result keep all
    create_table_artifact(key=f"ctxrag-metrics-{name}".replace("_", "-"), table=rows, description=f"{Path(evalset).name} on {name!r}")
    create_markdown_artifact(
        key=f"ctxrag-chart-{name}".replace("_", "-"),
        markdown=chart_markdown(chart, f"Evaluation of `{name}` on `{Path(evalset).name}`", run_dir),
    )
    ledger = Ledger(root)
    return {
        "metrics": result.metrics,
        "unavailable": unavailable,
        "unparseable_judgements": result.unparseable_judgements,
        "rerank_fallbacks": result.rerank_fallbacks,
        "paid_calls": summarize(ledger.rows(run_id)),
        "run_dir": str(run_dir),
        "chart": str(chart),
        "missing_golden": result.missing_golden,
        "queries": len(questions.queries),
        "seconds": round(result.seconds, 3),
    }

"""The stages of an evaluate run: what is scored (strategies, cut-offs, the reranker and the judge, or why not),
the scoring itself, and what the run writes (per-query results, the chart, the artifacts, the result)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE
from prefect.runtime import flow_run

from ctxrag.storage.environment import ctxrag_home
from ctxrag.storage.index_store import IndexStore
from ctxrag.storage.ledger import Ledger, summarize
from ctxrag.tasks.common.display import readable_rows
from ctxrag.tasks.common.progress import stage_progress
from ctxrag.tasks.evaluation.answer import EndToEnd
from ctxrag.tasks.evaluation.evalset import EvalSet, load_evalset
from ctxrag.tasks.evaluation.evaluate import Evaluation, evaluate, require_golden_chunks
from ctxrag.tasks.evaluation.report import chart_markdown, metrics_rows, write_chart, write_run
from ctxrag.tasks.evaluation.runs import CHART, run_folder
from ctxrag.tasks.options import EvaluateOptions
from ctxrag.tasks.retrieval.cross_encoder import CrossEncoderReranker
from ctxrag.tasks.retrieval.rerank import RerankSpec
from ctxrag.tasks.retrieval.search import Searcher, Strategy, StrategyConfig, strategy_of


def every_strategy(own: StrategyConfig) -> list[StrategyConfig]:
    """Each strategy at its defaults, then the index's own (``ctxrag tune``'s choice) if it is not one of them."""
    every = [StrategyConfig(strategy) for strategy in Strategy]
    return every + ([own] if own not in every else [])


@dataclass
class Scoring:
    """What an evaluate run scores: rows whose key is not configured are in ``unavailable`` (with the variable to
    set), never computed."""

    name: str
    home: Path
    run_id: str
    options: EvaluateOptions
    own: StrategyConfig  # the index's strategy (tuned, or the default)
    strategies: list[StrategyConfig]
    ks: list[int] = field(default_factory=list)
    rerank: RerankSpec | None = None
    judge: dict[str, Any] | None = None
    unavailable: dict[str, str] = field(default_factory=dict)

    @classmethod
    def plan(cls, name: str, options: EvaluateOptions, home: str | None, questions: EvalSet) -> Scoring:
        root = Path(home) if home else ctxrag_home()
        own = strategy_of(IndexStore(root), name)
        strategies = [StrategyConfig.from_str(value) for value in options.strategies() or []] or every_strategy(own)
        scoring = cls(name, root, str(flow_run.id or uuid.uuid4()), options, own, strategies)
        scoring.ks = sorted(set(options.ks() or questions.format.default_ks))
        scoring.rerank = RerankSpec.from_str(options.rerank, options.rerank_model)
        if scoring.rerank and (variable := scoring.rerank.missing_key()):
            scoring.unavailable.update(
                {f"{strategy.label}+{scoring.rerank.label}": f"needs {variable}" for strategy in strategies}
            )
            scoring.rerank = None
        if options.end_to_end:
            if RerankSpec("claude").missing_key():
                scoring.unavailable["accuracy"] = "needs ANTHROPIC_API_KEY"
            else:
                scoring.judge = {
                    "answer_model": options.answer_model,
                    "judge_model": options.judge_model,
                    "subject": options.subject,
                }
        return scoring


@task(cache_policy=NONE)
def load_evaluation_set(path: str) -> EvalSet:
    return load_evalset(path)


@task(cache_policy=NONE)
def run_evaluation(scoring: Scoring, questions: EvalSet) -> Evaluation:
    """Every question searched with every strategy (and reranker), its golden chunks checked first; paid rows run
    four at a time."""
    ledger = Ledger(scoring.home).append
    searcher = Searcher(
        IndexStore(scoring.home).open(scoring.name),
        server_rrf=scoring.options.server_rrf,
        home=scoring.home,
        ledger=ledger,
        run_id=scoring.run_id,
    )
    require_golden_chunks(
        searcher, questions, scoring.name
    )  # before any query is embedded (paid with Voyage) or result saved
    searcher.prefetch([question.query for question in questions.queries])
    rerankers = [scoring.rerank.build(ledger, scoring.run_id)] if scoring.rerank else []
    judge = EndToEnd(ledger=ledger, run_id=scoring.run_id, **scoring.judge) if scoring.judge is not None else None
    paid = bool(judge) or any(not isinstance(reranker, CrossEncoderReranker) for reranker in rerankers)
    with stage_progress("evaluating", "searches") as update:
        return evaluate(
            searcher,
            questions,
            scoring.strategies,
            scoring.ks,
            progress=update,
            rerankers=rerankers,
            end_to_end=judge,
            workers=4 if paid else 1,
        )


@task(cache_policy=NONE)
def save_evaluation(run_dir: Path, config: dict[str, object], result: Evaluation) -> Path:
    write_run(run_dir, config, result.metrics, result.per_query)
    return write_chart(result.metrics, run_dir / CHART, f"{config['index']}: {Path(str(config['evalset'])).name}")


def report_evaluation(scoring: Scoring, evalset: str, questions: EvalSet, result: Evaluation) -> dict[str, object]:
    """Write the run's folder (config, per-query results, chart) and artifacts; return the metrics and where they went."""
    name, options = scoring.name, scoring.options
    if result.missing_golden:
        get_run_logger().warning(
            "%d golden chunks of %s are not in index %r and count as misses (first: %s)",
            len(result.missing_golden),
            Path(evalset).name,
            name,
            ", ".join(result.missing_golden[:3]),
        )
    run_dir = run_folder(scoring.home, name)
    config: dict[str, object] = {
        "index": name,
        "index_manifest": IndexStore(scoring.home).manifest(name),
        "evalset": str(Path(evalset).resolve()),
        "format": questions.format.value,
        "ks": scoring.ks,
        "strategies": [strategy.label for strategy in scoring.strategies],
        "index_strategy": scoring.own.label,
        "rerank": {"provider": options.rerank, "model": options.rerank_model} if options.rerank != "none" else None,
        "end_to_end": scoring.judge,
        "unavailable": scoring.unavailable,
    }
    chart = save_evaluation(run_dir, config, result)
    rows = readable_rows(metrics_rows(result.metrics))  # rounded for people; metrics.parquet and the result keep all
    key = name.replace("_", "-")
    create_table_artifact(key=f"ctxrag-metrics-{key}", table=rows, description=f"{Path(evalset).name} on {name!r}")
    create_markdown_artifact(
        key=f"ctxrag-chart-{key}",
        markdown=chart_markdown(chart, f"Evaluation of `{name}` on `{Path(evalset).name}`", run_dir),
    )
    return {
        "metrics": result.metrics,
        "unavailable": scoring.unavailable,
        "unparseable_judgements": result.unparseable_judgements,
        "rerank_fallbacks": result.rerank_fallbacks,
        "paid_calls": summarize(Ledger(scoring.home).rows(scoring.run_id)),
        "run_dir": str(run_dir),
        "chart": str(chart),
        "missing_golden": result.missing_golden,
        "queries": len(questions.queries),
        "seconds": round(result.seconds, 3),
    }

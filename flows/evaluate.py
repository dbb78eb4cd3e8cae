"""The ``evaluate`` flow: strategies x k over an evaluation set -> metrics table, chart, per-query results. It only
composes: what is scored, the scoring and the report are in ``ctxrag.tasks.stages.scoring``."""

from __future__ import annotations

from prefect import flow

from ctxrag.storage.names import DEFAULT_NAME
from ctxrag.tasks.options import EvaluateOptions
from ctxrag.tasks.runners import run_name
from ctxrag.tasks.stages.input_checks import check_deployment_run
from ctxrag.tasks.stages.scoring import Scoring, load_evaluation_set, report_evaluation, run_evaluation


@flow(name="ctxrag-evaluate", flow_run_name=run_name("evaluate"))
def evaluate_index(
    evalset: str, name: str = DEFAULT_NAME, options: EvaluateOptions = EvaluateOptions(), home: str | None = None
) -> dict[str, object]:
    """Score every strategy (or the given ones) of index NAME on EVALSET; returns metrics and where results went.
    Every strategy includes the one ``ctxrag tune`` chose for the index, when it is not one of the others.

    ``options.rerank`` (cohere, claude, local:MODEL) adds ``<strategy>+rerank-<provider>`` rows; ``end_to_end`` adds
    ``accuracy`` (Claude answers, a Claude judge grades). Rows or metrics whose key is not configured are listed
    under ``unavailable`` with the variable to set, never computed.
    A deployment's run naming a path outside the folders it was served for is refused first.
    """
    check_deployment_run({"evalset": evalset}, home)
    questions = load_evaluation_set(evalset)
    scoring = Scoring.plan(name, options, home, questions)
    result = run_evaluation(scoring, questions)
    return report_evaluation(scoring, evalset, questions, result)

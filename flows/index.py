"""The ``index`` flow: load -> contextualize (mapped per document) -> embed -> publish, idempotent and atomic. It
only composes: each stage's work, and its policy (failed documents, task batches, the gate), is in
``ctxrag.tasks.stages``."""

from __future__ import annotations

from prefect import flow

from ctxrag.storage.names import DEFAULT_NAME
from ctxrag.tasks.options import IndexOptions
from ctxrag.tasks.runners import make_task_runner, run_name
from ctxrag.tasks.stages.contextualize import contextualize_corpus
from ctxrag.tasks.stages.embed import embed_corpus
from ctxrag.tasks.stages.input_checks import check_deployment_run, check_index_input, in_deployment_run
from ctxrag.tasks.stages.load import compare_with_live, load_corpus
from ctxrag.tasks.stages.publish import build_plan, publish_version
from ctxrag.tasks.stages.report import report_run
from ctxrag.tasks.stages.run import IndexRun


@flow(name="ctxrag-index", flow_run_name=run_name("index"), task_runner=make_task_runner())
def index_corpus(
    source: str, name: str = DEFAULT_NAME, options: IndexOptions = IndexOptions(), home: str | None = None
) -> dict[str, object]:
    """Index SOURCE (a JSON corpus or a folder) under NAME; returns a report of what was done and reused.

    ``options``: the contextualizer (and Claude's calls), the embedder, the backend, a folder's files and the quality
    gate, as ``ctxrag index --help`` describes them. ``home``: the ctxrag home (default ``$CTXRAG_HOME``). A version
    with the live one's build key publishes nothing; a new one goes live only when complete.
    A deployment's run is checked first as ``ctxrag index`` checks its input, and refused when it names a path outside
    the folders it was served for (``tasks/stages/input_checks.py``).
    """
    if in_deployment_run():  # parameters from the server: checked as the command checks its own, before any work
        check_deployment_run({"source": source, "options.gate.evalset": options.gate.evalset}, home)
        check_index_input(source, name, options)
    run = IndexRun.begin(name, options, home)
    with run.locked():
        corpus = load_corpus(source, options.files)
        changes = compare_with_live(corpus, name, run.home)
        run.keep_index_precision()
        run.lap("load")
        contexts = contextualize_corpus(corpus, run)
        run.lap("contextualize")
        plan = build_plan(corpus, contexts.texts, contexts.keys, run.embedder, run.contextualizer, options.backend)
        vectors = embed_corpus(plan, run)
        run.lap("embed")
        published = publish_version(plan, vectors.vectors, source, run)
        run.lap("publish")
    return report_run(run, corpus, changes, contexts, plan, vectors, published)

"""Stage 1: read and validate the source, and count documents new, changed, unchanged and removed."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from ctxrag.tasks.common.models import Corpus
from ctxrag.tasks.common.retry import retry_only_io
from ctxrag.tasks.load import load_source
from ctxrag.tasks.options import FileOptions
from ctxrag.tasks.stored import document_changes


@task(retries=2, retry_delay_seconds=[1, 5], retry_condition_fn=retry_only_io, cache_policy=NONE)
def load_corpus(source: str, files: FileOptions = FileOptions()) -> Corpus:
    """Read and validate the source (a JSON corpus or a folder, whose files ``files`` picks); skipped records and
    files are logged as warnings."""
    corpus = load_source(source, include=files.include, exclude=files.exclude, max_file_bytes=files.max_file_bytes)
    logger = get_run_logger()
    for warning in corpus.warnings:
        logger.warning(warning)
    return corpus


def compare_with_live(corpus: Corpus, name: str, home: Path) -> dict[str, int]:
    """Documents new, changed, unchanged and removed, against the live index's state (by content hash)."""
    return document_changes(corpus, name, home)

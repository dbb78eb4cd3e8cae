"""An index's latest evaluation run, found among the run folders ``ctxrag evaluate`` writes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pytest

from ctxrag.tasks.evaluation.report import write_chart, write_run
from ctxrag.tasks.evaluation.runs import RUN_NAME, latest_run, run_chart, run_folder

METRICS = {"bm25": {"pass@5": 0.5, "pass@10": 0.75}, "hybrid-score": {"pass@5": 0.625, "pass@10": math.nan}}


def a_run(home: Path, index: str, at: str, chart: bool = True, metrics: bool = True) -> Path:
    """A run folder of ``index`` made at ``at`` (YYYYmmddTHHMMSS), written as ``ctxrag evaluate`` writes one."""
    folder = home / "runs" / f"evaluate-{index}-{at}-000001"
    config = {
        "index": index,
        "index_manifest": {"version": f"v-{at}"},
        "evalset": "/data/questions.jsonl",
        "format": "jsonl",
        "ks": [5, 10],
        "index_strategy": "hybrid-score",
    }
    write_run(folder, config, METRICS, pa.table({"query_id": ["q1"]}))
    if not metrics:
        (folder / "metrics.parquet").unlink()
    if chart:
        write_chart(METRICS, folder / "chart.svg", "title")
    return folder


def test_no_run_is_none(tmp_path: Path) -> None:
    assert latest_run(tmp_path, "sample") is None
    a_run(tmp_path, "other", "20260101T000000")
    assert latest_run(tmp_path, "sample") is None


def test_the_newest_complete_run_of_the_index_is_the_latest(tmp_path: Path) -> None:
    a_run(tmp_path, "sample", "20260101T000000")
    a_run(tmp_path, "sample", "20260301T000000", chart=False)
    a_run(tmp_path, "sample", "20260401T000000", metrics=False)  # still being written
    a_run(tmp_path, "sample-b", "20260501T000000")  # another index whose name starts with this one's
    (tmp_path / "runs" / "notes").mkdir()
    (tmp_path / "runs" / "evaluate-sample-20260601T000000-000001").mkdir()  # no config: not a run
    found = latest_run(tmp_path, "sample")
    assert found is not None and found.run == "evaluate-sample-20260301T000000-000001"
    assert (found.version, found.created_at, found.ks, found.chart) == (
        "v-20260301T000000",
        "2026-03-01T00:00:00",
        [5, 10],
        None,
    )
    shown = found.to_dict()
    assert shown["metrics"][1] == {"strategy": "hybrid-score", "pass@5": 0.625, "pass@10": None}  # NaN: JSON's null
    assert json.loads(json.dumps(shown, allow_nan=False)) == shown and shown["chart"] is False
    other = latest_run(tmp_path, "sample-b")
    assert other is not None and other.run.startswith("evaluate-sample-b-") and other.chart is not None


def test_a_chart_is_read_only_from_a_run_of_the_index(tmp_path: Path) -> None:
    folder = a_run(tmp_path, "sample", "20260101T000000")
    assert run_chart(tmp_path, "sample", folder.name) == folder / "chart.svg"
    for run in (
        "../../etc/passwd",
        f"{folder.name}/../x",
        "evaluate-sample-1-000001",
        "",
        folder.name + "/",
        folder.name + "\n",
    ):
        assert run_chart(tmp_path, "sample", run) is None, run
    assert run_chart(tmp_path, "other", folder.name) is None
    renamed = tmp_path / "runs" / "evaluate-other-20260101T000000-000001"
    folder.rename(renamed)  # a run whose folder name and config disagree
    assert run_chart(tmp_path, "other", renamed.name) is None


@pytest.mark.parametrize("index", ["sample", "a-b_c", "x1"])
def test_a_new_run_s_folder_is_named_as_the_runs_are_read(tmp_path: Path, index: str) -> None:
    found = RUN_NAME.fullmatch(run_folder(tmp_path, index).name)
    assert found is not None and found["index"] == index

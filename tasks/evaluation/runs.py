"""Evaluation runs as ``ctxrag evaluate`` keeps them: one folder per run under ``$CTXRAG_HOME/runs/``, named
``evaluate-INDEX-YYYYmmddTHHMMSS-MICROS`` (``run_folder``), holding ``config.json``, ``metrics.parquet``,
``per_query.parquet`` and ``chart.svg`` (``report.write_run``, ``report.write_chart``). ``latest_run`` finds an index's
newest complete run: what the search page shows of the index's quality."""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

RUNS = "runs"  # in CTXRAG_HOME
RUN_NAME = re.compile(r"evaluate-(?P<index>[a-z0-9_-]+)-(?P<at>\d{8}T\d{6})-(?P<micros>\d{6})")  # fullmatch
CHART = "chart.svg"


def run_folder(home: Path, index: str) -> Path:
    """A new run's folder for ``index`` (not made here): its name sorts by the time it was made."""
    return home / RUNS / f"evaluate-{index}-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**6:06d}"


@dataclass(frozen=True)
class RunSummary:
    """One evaluation run at a glance: its folder's name (``run``), the index and the version it scored, the
    evaluation set, its format and ks, the strategies scored (``index_strategy``: the index's own) and their metrics
    (one row per strategy: ``{"strategy": ..., "pass@5": ...}``); ``chart``: its chart's path, if it has one."""

    run: str
    index: str
    version: str | None
    created_at: str
    evalset: str
    format: str
    ks: list[int]
    index_strategy: str | None
    metrics: list[dict[str, Any]]
    chart: Path | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "index": self.index,
            "version": self.version,
            "created_at": self.created_at,
            "evalset": self.evalset,
            "format": self.format,
            "ks": self.ks,
            "index_strategy": self.index_strategy,
            "metrics": [{name: _finite(value) for name, value in row.items()} for row in self.metrics],
            "chart": self.chart is not None,
        }


def latest_run(home: Path, index: str) -> RunSummary | None:
    """``index``'s newest run whose metrics were written (a run still being written, or one whose files cannot be
    read, is passed over), or None when it has none."""
    for folder in sorted(_runs_of(home, index), key=lambda path: path.name, reverse=True):
        summary = _summary(folder, index)
        if summary is not None:
            return summary
    return None


def run_chart(home: Path, index: str, run: str) -> Path | None:
    """The chart of run ``run`` (a folder name ``latest_run`` gave) of ``index``, or None when there is no such run
    or chart. The name is checked against the runs' own pattern: no other path is ever read."""
    found = RUN_NAME.fullmatch(run)
    if found is None or found["index"] != index:
        return None
    chart = home / RUNS / run / CHART
    return chart if chart.is_file() and _config(chart.parent).get("index") == index else None


def _runs_of(home: Path, index: str) -> list[Path]:
    try:
        folders = list((home / RUNS).iterdir())
    except FileNotFoundError:
        return []
    return [folder for folder in folders if (found := RUN_NAME.fullmatch(folder.name)) and found["index"] == index]


def _summary(folder: Path, index: str) -> RunSummary | None:
    import pyarrow.parquet as pq

    config = _config(folder)
    if config.get("index") != index:  # a name another index's run could share: evaluate-a-b-... for index "a-b"
        return None
    try:
        metrics = pq.read_table(folder / "metrics.parquet").to_pylist()
    except (OSError, ValueError):
        return None
    found = RUN_NAME.fullmatch(folder.name)
    assert found is not None
    manifest = config.get("index_manifest") or {}
    chart = folder / CHART
    return RunSummary(
        run=folder.name,
        index=index,
        version=manifest.get("version") if isinstance(manifest, dict) else None,
        created_at=datetime.strptime(found["at"], "%Y%m%dT%H%M%S").isoformat(),
        evalset=str(config.get("evalset", "")),
        format=str(config.get("format", "")),
        ks=[int(k) for k in config.get("ks", [])],
        index_strategy=config.get("index_strategy"),
        metrics=metrics,
        chart=chart if chart.is_file() else None,
    )


def _finite(value: Any) -> Any:
    """A metric as JSON has it: a number that is not one (NaN, an infinity) is null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _config(folder: Path) -> dict[str, Any]:
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}

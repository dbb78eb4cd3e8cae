"""An evaluation run's per-query results as a pandas DataFrame; two strategies compared, or split where they disagree.

    from ctxrag.tasks.evaluation.results import compare, disagreements, load_run
    frame = load_run("~/.ctxrag/runs/evaluate-codebase-...")          # one row per (strategy, query)
    frame[frame["golden_ranks"].map(len) == 0]                        # queries where no golden chunk was retrieved
    compare(run_dir, "hybrid", "vector", "pass@10")                   # mean difference and its 95% interval
    disagreements(frame, "bm25", "vector", "hit@5", ["hybrid-doc"])   # what the fusion does where its parts disagree

Reads what ``ctxrag.tasks.evaluation.report.write_run`` wrote: ``per_query.parquet`` and ``config.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ctxrag.tasks.evaluation.evalset import load_evalset
from ctxrag.tasks.evaluation.metrics import hit_at_k, ndcg_at_k
from ctxrag.tasks.evaluation.significance import PairedBootstrap, paired_bootstrap

LEADING = ["query_id", "query", "golden", "strategy", "retrieved", "golden_ranks"]
PER_QUERY_METRIC = re.compile(r"^(pass|precision|recall|mrr|hit|ndcg)@\d+$")


def load_run(run_dir: str | Path) -> pd.DataFrame:
    """One row per (strategy, query), in the run's order.

    Columns: ``query_id``, ``query``, ``golden`` (golden chunk references), ``strategy``, ``retrieved`` (the ranked
    chunk references, as deep as the largest k), ``golden_ranks`` (the 1-based ranks in ``retrieved`` where golden
    chunks landed, ascending; empty if none was retrieved), then the per-query metrics (``pass@k`` or
    ``precision@k``/``recall@k``/``mrr@k``, and ``hit@k``, ``ndcg@k``), then ``answer``/``correct`` for end-to-end
    runs. ``f1@k`` and ``accuracy`` are not per-query values: they are in ``metrics.parquet``. The run's config is in
    ``frame.attrs["config"]``.

    Runs saved before golden references were stored take them from the evaluation set named in the config (which
    must still hold the same queries), and get ``hit@k``/``ndcg@k`` computed from the stored rankings.
    """
    run_dir = Path(run_dir).expanduser()
    path = run_dir / "per_query.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: no per_query.parquet; not an evaluation run folder")
    config_path = run_dir / "config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    rows = pq.ParquetFile(path).read().to_pylist()
    if rows and "golden" not in rows[0]:
        _add_golden_from_evalset(rows, config, run_dir)
    ks = [int(k) for k in config.get("ks", [])]
    for row in rows:
        retrieved, golden = list(row.get("retrieved") or []), list(row.get("golden") or [])
        row["retrieved"], row["golden"] = retrieved, golden
        wanted, ranks = set(golden), dict[str, int]()
        for rank, ref in enumerate(retrieved, start=1):
            if ref in wanted:
                ranks.setdefault(ref, rank)
        row["golden_ranks"] = sorted(ranks.values())
        for k in ks:
            row.setdefault(f"hit@{k}", hit_at_k(retrieved, golden, k))
            row.setdefault(f"ndcg@{k}", ndcg_at_k(retrieved, golden, k))
    names = list(dict.fromkeys(name for row in rows for name in row))
    metrics = [name for name in names if PER_QUERY_METRIC.match(name)]
    metrics = [
        name
        for family in ("pass", "precision", "recall", "mrr", "hit", "ndcg")
        for name in metrics
        if name.startswith(family + "@")
    ]
    columns = LEADING + metrics + [name for name in names if name not in LEADING and name not in metrics]
    frame = pd.DataFrame(rows, columns=columns)
    frame.attrs["config"] = config
    return frame


def compare(
    run_dir: str | Path,
    a: str,
    b: str,
    metric: str,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedBootstrap:
    """Paired bootstrap of ``metric`` for strategy ``a`` minus strategy ``b`` over the run's queries.

    ``a``/``b`` are row names as the run reports them (``hybrid``, ``vector+rerank-cohere``, ...); ``metric`` is a
    per-query metric such as ``pass@10``, ``recall@3``, ``mrr@3``, ``hit@5`` or ``ndcg@10``.
    """
    first, second = _per_query(load_run(run_dir), [a, b], metric, str(run_dir))
    return paired_bootstrap(first, second, resamples=resamples, seed=seed, confidence=confidence)


def disagreements(frame: pd.DataFrame, a: str, b: str, metric: str, others: Sequence[str] = ()) -> pd.DataFrame:
    """Where strategies ``a`` and ``b`` disagree: the queries split by which of the two finds them (its ``metric``
    is 1: with ``hit@5``, a golden chunk in the top 5; with ``pass@5``, every golden chunk), one row per case
    (``only <a>``, ``only <b>``, ``both``, ``neither``), with the number of queries and the mean ``metric`` of ``a``,
    ``b`` and each of ``others`` on them. ``frame`` is ``load_run``'s, or any frame with its ``query_id``,
    ``strategy`` and metric columns."""
    names = list(dict.fromkeys([a, b, *others]))
    values = dict(zip(names, _per_query(frame, names, metric, "the run")))
    found_a, found_b = values[a] == 1.0, values[b] == 1.0
    cases = {
        f"only {a}": found_a & ~found_b,
        f"only {b}": found_b & ~found_a,
        "both": found_a & found_b,
        "neither": ~found_a & ~found_b,
    }
    rows = [
        {
            "case": case,
            "queries": int(mask.sum()),
            **{name: float(values[name][mask].mean()) if mask.any() else float("nan") for name in names},
        }
        for case, mask in cases.items()
    ]
    return pd.DataFrame(rows).set_index("case")


def _per_query(frame: pd.DataFrame, strategies: Sequence[str], metric: str, source: str) -> list[np.ndarray]:
    """Each strategy's per-query ``metric`` values, checked to be over the same queries in the same order."""
    present = list(dict.fromkeys(frame["strategy"]))
    for name in strategies:
        if name not in present:
            raise ValueError(f"strategy {name!r} is not in {source}; it has {present}")
    available = [column for column in frame.columns if PER_QUERY_METRIC.match(column)]
    if metric not in available:
        hint = " (F1 is computed from the mean precision and recall, not per query)" if metric.startswith("f1@") else ""
        raise ValueError(f"{metric!r} is not a per-query metric of {source}{hint}; choose one of {available}")
    rows = [frame[frame["strategy"] == name] for name in strategies]
    for name, selected in zip(strategies[1:], rows[1:]):
        if list(selected["query_id"]) != list(rows[0]["query_id"]):
            raise ValueError(f"{strategies[0]!r} and {name!r} were not scored on the same queries in the same order")
    return [selected[metric].to_numpy(dtype=float) for selected in rows]


def _add_golden_from_evalset(rows: list[dict[str, object]], config: dict[str, object], run_dir: Path) -> None:
    """Older runs: golden references by position, from the evaluation set the config names."""
    if "evalset" not in config:
        raise ValueError(
            f"{run_dir}: per-query results without golden chunks, and no config.json naming the evaluation set"
        )
    queries = load_evalset(str(config["evalset"])).queries
    position: dict[object, int] = {}
    for row in rows:
        index = position.get(row["strategy"], 0)
        position[row["strategy"]] = index + 1
        if index >= len(queries) or queries[index].query != row["query"] or queries[index].query_id != row["query_id"]:
            raise ValueError(
                f"{run_dir}: the evaluation set {config['evalset']} no longer matches the run's queries; golden chunks unknown"
            )
        row["golden"] = list(queries[index].golden)

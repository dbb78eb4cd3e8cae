"""`benchmarks/scale.py`'s report: the sizes' table, growth exponents, scale.json and scale.md from the records."""

from __future__ import annotations

import json
import math
from pathlib import Path

from common import REPO, portable_path  # benchmarks/common.py
from scale_corpus import QUERIES

STAGES = ("load", "contextualize", "embed", "publish")


def _stage(record: dict, stage: str) -> float | None:
    return (record.get("report") or {}).get("seconds", {}).get(stage)


def table_rows(records: list[dict]) -> list[list[str]]:
    rows = []
    for record in records:
        report = record.get("report") or {}
        index = record.get("index") or {}
        stages = [_stage(record, stage) for stage in STAGES]
        wall = index.get("wall_seconds")
        chunks = report.get("chunks") or record.get("expected_chunks")
        status = record.get("status", "?")
        rows.append(
            [
                record["size"] + ("" if status == "ok" else f" ({status.upper()})"),
                _fmt(chunks, ","),
                _fmt(report.get("documents") or record.get("expected_documents"), ","),
                _fmt(wall, ".1f"),
                *[_fmt(value, ".2f") for value in stages],
                _fmt(wall - sum(stages) if wall and all(value is not None for value in stages) else None, ".1f"),
                _fmt(chunks / wall if chunks and wall and status == "ok" else None, ".1f"),
                _fmt(index.get("cpu_seconds"), ".0f"),
                _fmt(index.get("peak_rss_sum_mb"), ",.0f"),
                _fmt(index.get("peak_rss_largest_mb"), ",.0f"),
                _fmt(index.get("peak_threads"), "d"),
                _fmt(index.get("peak_threads_largest"), "d"),
                _fmt((record.get("task_runs") or {}).get("total"), ","),
                _fmt((record.get("search") or {}).get("wall_seconds"), ".2f"),
                _fmt((record.get("queries") or {}).get("hybrid_p50_ms"), ".1f"),
                _fmt((record.get("queries") or {}).get("hybrid_ranking_p50_ms"), ".2f"),
                _fmt(_default_query(record, "p50_ms"), ".1f"),
                _fmt(_default_query(record, "ranking_p50_ms"), ".2f"),
            ]
        )
    return rows


HEADER = [
    "size",
    "chunks",
    "docs",
    "wall s",
    "load s",
    "context. s",
    "embed s",
    "publish s",
    "other s",
    "chunks/s",
    "CPU s",
    "peak RSS sum MB",
    "largest proc MB",
    "peak threads",
    "largest proc threads",
    "task runs",
    "search proc s",
    "hybrid p50 ms",
    "ranking p50 ms",
    "default p50 ms",
    "default ranking p50 ms",
]


def _default_query(record: dict, figure: str) -> object:
    """A figure of the default strategy's queries (recorded since the default became a strategy of its own)."""
    queries = record.get("queries") or {}
    return queries.get(f"{queries['default'].replace('-', '_')}_{figure}") if queries.get("default") else None


def _fmt(value: object, spec: str) -> str:
    if value is None:
        return "-"
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


def markdown_table(records: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join(["---"] + ["---:"] * (len(HEADER) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(records)]
    return "\n".join(lines)


def growth(records: list[dict]) -> list[dict[str, object]]:
    """Between consecutive sizes of the same family: exponent e in cost ~ chunks^e for each stage (1 = linear)."""
    out = []
    by_family: dict[str, list[dict]] = {}
    for record in records:
        if record.get("status") == "ok":
            by_family.setdefault(record["family"], []).append(record)
    for family, members in by_family.items():
        members.sort(key=lambda record: record["report"]["chunks"])
        for small, large in zip(members, members[1:]):
            n1, n2 = small["report"]["chunks"], large["report"]["chunks"]
            if n2 <= n1:
                continue
            entry: dict[str, object] = {
                "family": family,
                "from": small["size"],
                "to": large["size"],
                "chunks_ratio": round(n2 / n1, 2),
            }
            values = {stage: (_stage(small, stage), _stage(large, stage)) for stage in STAGES}
            values["wall"] = (small["index"]["wall_seconds"], large["index"]["wall_seconds"])
            values["peak_rss_sum"] = (small["index"]["peak_rss_sum_mb"], large["index"]["peak_rss_sum_mb"])
            values["hybrid_p50"] = (
                small.get("queries", {}).get("hybrid_p50_ms"),
                large.get("queries", {}).get("hybrid_p50_ms"),
            )
            values["ranking_p50"] = (
                small.get("queries", {}).get("hybrid_ranking_p50_ms"),
                large.get("queries", {}).get("hybrid_ranking_p50_ms"),
            )
            for what, (t1, t2) in values.items():
                if t1 and t2 and t1 > 0.05 and t2 > 0:  # stages under 50 ms are timer noise
                    entry[what] = round(math.log(t2 / t1) / math.log(n2 / n1), 2)
            out.append(entry)
    return out


def write_results(out: Path, records: list[dict], meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    slopes = growth(records)
    (out / "scale.json").write_text(json.dumps({"meta": meta, "growth": slopes, "sizes": records}, indent=2) + "\n")
    merged = "".join(
        f" Sizes added later by `{run['command']}` ({run['date']}, load average {run['load_average_start']} at its start)."
        for run in meta.get("merged_runs", [])
    )
    code = f"git HEAD {meta.get('git_head')}" + (
        f", run from a copy of it (`--code {meta['code']}`) because the working tree had uncommitted changes"
        if meta.get("code") and meta["code"] != portable_path(REPO)
        else f" plus working-tree changes: {meta.get('working_tree_changes')}"
    )
    lines = [
        "# ctxrag scale benchmark",
        "",
        f"Date: {meta['date']}. Machine: {meta['cpus']} cores ({meta['cpu']}), **2 cores, shared and noisy**: other work "
        f"ran at the same time (load average {meta['load_average_start']} at the start, {meta['load_average_end']} at "
        f"the end), so wall seconds can be off by a factor of 2 or more; CPU seconds (the tree's user + system) are "
        f"steadier. Python {meta['python']}, Prefect {meta['prefect']}. Produced by `{meta['command']}`.{merged} Code measured: {code}.",
        "",
        "Method: `benchmarks/scale.py`'s docstring. `other s`: wall minus the stages (Python and Prefect start-up, the "
        "flow run's set-up and shut-down). `task runs`: from the run's log (Prefect's `Task run '...' - Finished in state` "
        "lines; the Prefect database's count is under each run). `search proc s`: `ctxrag search QUERY --json` as a "
        f"process, median of 3. `hybrid p50 ms`: {len(QUERIES)} distinct queries in a process with the index loaded and the "
        "model warm, each embedding its query; `ranking p50 ms`: the same with the query vectors made (BM25 + exact "
        "cosine + fusion: the part that depends on the index's size); `default ...`: the same for the default strategy.",
        "",
        markdown_table(records),
        "",
        "Sizes:",
        "",
    ]
    for record in records:
        lines.append(
            f"- **{record['size']}**: `{record['source']}` {' '.join(record['options'])}. {record.get('note', '')}".rstrip()
        )
    fast = [record for record in records if record.get("seeded")]
    if fast:
        lines += [
            "",
            "**Fast path (synthetic sizes)**: the embeddings cache was pre-seeded with random unit vectors for exactly the "
            "keys each run asks for (`scale_corpus.seed_embeddings`), so the embed stage loaded no model and ran no inference "
            "(`chunks_embedded` = "
            + ", ".join(f"{record['size']}: {record.get('report', {}).get('chunks_embedded', '-')}" for record in fast)
            + "); the `-seeded-contexts` sizes had the empty contexts of `--contextualizer none` pre-seeded too, so their "
            "contextualize stage ran no per-document task. The vectors are random: the synthetic sizes' search results mean "
            "nothing, their timings do. Seeding time is not in the index wall time.",
        ]
    if slopes:
        lines += [
            "",
            "## Growth exponents",
            "",
            "Between consecutive sizes of the same family (same settings), e in cost ~ chunks^e: 1 is linear, 2 "
            "quadratic; below 1 means fixed costs still dominate the smaller size. Stages under 50 ms are left out.",
            "",
            "| family | from -> to | chunks x | "
            + " | ".join(list(STAGES) + ["wall", "peak RSS", "hybrid p50", "ranking p50"])
            + " |",
            "|---|---|---:|" + "---:|" * (len(STAGES) + 4),
        ]
        for entry in slopes:
            cells = [
                _fmt(entry.get(key), ".2f") for key in (*STAGES, "wall", "peak_rss_sum", "hybrid_p50", "ranking_p50")
            ]
            lines.append(
                f"| {entry['family']} | {entry['from']} -> {entry['to']} | {entry['chunks_ratio']} | "
                + " | ".join(cells)
                + " |"
            )
    lines += ["", "## Per run", ""]
    for record in records:
        index = record.get("index") or {}
        lines.append(f"### {record['size']} ({record.get('status')})")
        lines.append("")
        lines.append(
            f"- load average before / after: {record.get('load_average_before')} / {record.get('load_average_after')}"
        )
        if record.get("seeded"):
            lines.append(f"- seeded vectors: {record['seeded']}")
        for process in index.get("processes", [])[:4]:
            lines.append(
                f"- process `{process['what']}`: peak RSS {process['peak_rss_mb']} MB, "
                f"{process.get('peak_threads', '?')} threads at most, CPU {process['cpu_seconds']} s"
            )
        runs = record.get("task_runs") or {}
        if runs.get("total") is not None:
            lines.append(
                f"- task runs finished (run log): {runs['total']} ({', '.join(f'{name} {count}' for name, count in runs['by_task'].items())}); "
                f"states {runs.get('states')}; in the Prefect database: {runs.get('database_total', '-')} task runs, {runs.get('flow_runs', '-')} flow runs"
            )
        elif runs:
            lines.append(f"- task runs: not measured ({runs.get('note')})")
        if record.get("report"):
            report = record["report"]
            lines.append(
                f"- report: chunks {report['chunks']}, documents {report['documents']}, contextualized "
                f"{report['chunks_contextualized']}, embedded {report['chunks_embedded']}, reused {report['chunks_embedding_reused']}"
            )
        if record.get("queries") and "error" not in record["queries"]:
            q = record["queries"]
            lines.append(
                f"- in-process: open {q['open_seconds']} s; p50/p95 ms hybrid {q['hybrid_p50_ms']}/{q['hybrid_p95_ms']}, "
                f"vector {q['vector_p50_ms']}/{q['vector_p95_ms']}, bm25 {q['bm25_p50_ms']}/{q['bm25_p95_ms']}; hybrid with "
                f"query vectors made {q.get('hybrid_ranking_p50_ms')}"
                + (
                    f"; default {q['default']} {_default_query(record, 'p50_ms')}/{_default_query(record, 'p95_ms')}, with query "
                    f"vectors made {_default_query(record, 'ranking_p50_ms')}"
                    if q.get("default")
                    else ""
                )
                + f"; RSS {q['rss_mb']} MB"
                + (
                    f"; ANN {q['ann']}: recall@10 {q['ann_recall_at_10']}, @150 {q['ann_recall_at_150']} against exact "
                    f"({q['ann_recall_queries']} queries)"
                    if q.get("ann")
                    else ""
                )
            )
        if record.get("search") and "error" not in record["search"]:
            lines.append(
                f"- search process: {record['search']['walls']} s, peak RSS {record['search']['peak_rss_mb']} MB"
            )
        if record.get("status") in {"timeout", "failed"}:
            lines += ["- last lines of stderr:", "", "```", record.get("stderr_tail", ""), "```"]
        lines.append("")
    (out / "scale.md").write_text("\n".join(lines).rstrip() + "\n")

"""Where a warm service's memory goes: one thread calling ``WarmIndexes.search`` in a loop (no HTTP), the questions in
turn, and the process's memory printed every N searches: RSS split into anonymous and file-backed pages
(/proc/self/status), glibc's heap (mallinfo2: bytes in use, free inside the heap, mmapped), pyarrow's pool and
Python's allocated blocks. Options try the suspects: ``--trim-every`` calls glibc's ``malloc_trim(0)``; run under
``ARROW_DEFAULT_MEMORY_POOL=system`` (or ``mimalloc``) for another arrow pool. Prints each sample; ``--out NAME``
writes benchmarks/results/NAME.md and .json.

    python benchmarks/service_memory.py --home /tmp/scratch/home --name shared-codebase-chunks --searches 100000
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path

from common import RESULTS, SHARED_DATA, git, machine_meta, portable_path, write_report

QUESTIONS = SHARED_DATA / "codebase" / "evaluation_set.jsonl"


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_LIBC = ctypes.CDLL("libc.so.6")
_LIBC.mallinfo2.restype = _MallInfo2
_LIBC.fopen.restype = ctypes.c_void_p
_LIBC.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
_LIBC.fclose.argtypes = [ctypes.c_void_p]
_LIBC.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]


def arenas() -> tuple[int, float, float]:
    """All of glibc's arenas (malloc_info): how many, MB they hold from the system, MB free inside them."""
    import re
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".xml") as out:
        stream = _LIBC.fopen(out.name.encode(), b"w")
        _LIBC.malloc_info(0, stream)
        _LIBC.fclose(stream)
        xml = Path(out.name).read_text()
    total = xml[xml.rindex("</heap>") :]
    system = int(re.search(r'<system type="current" size="(\d+)"', total).group(1))  # type: ignore[union-attr]
    free = sum(int(size) for size in re.findall(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"', total))
    return xml.count("<heap nr="), system / 2**20, free / 2**20


def memory() -> dict[str, float]:
    """MB: RSS anonymous and file-backed, glibc's heap (in use, free inside it, mmapped), pyarrow's pool; Python's blocks."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    kb = lambda field: int(status[field].split()[0]) / 1024  # noqa: E731
    info = _LIBC.mallinfo2()
    count, system, free = arenas()
    sample = {
        "rss": kb("VmRSS"),
        "anon": kb("RssAnon"),
        "file": kb("RssFile"),
        "arenas": count,
        "arena_mb": system,
        "arena_free": free,
        "mmapped": info.hblkhd / 2**20,
        "blocks": sys.getallocatedblocks(),
    }
    if "pyarrow" in sys.modules:
        import pyarrow

        sample["arrow"] = pyarrow.default_memory_pool().bytes_allocated() / 2**20
    return {key: round(value, 2) for key, value in sample.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--home", type=Path, required=True, help="the index home (a scratch copy: searches write to it)"
    )
    parser.add_argument("--name", default="codebase", help="the index's name")
    parser.add_argument("--searches", type=int, default=30_000)
    parser.add_argument("--every", type=int, default=2_000, help="print the memory every N searches")
    parser.add_argument("--trim-every", type=int, default=0, help="call malloc_trim(0) every N searches (0: never)")
    parser.add_argument(
        "--questions", type=Path, default=QUESTIONS, help='a JSON-lines file of {"query": ...}: asked in turn'
    )
    parser.add_argument("--out", help="the results' name: benchmarks/results/OUT.md and .json (default: print only)")
    args = parser.parse_args()
    os.environ["CTXRAG_HOME"] = str(args.home)
    from ctxrag.services.warm import WarmIndexes
    from ctxrag.tasks.common.search_request import SearchRequest

    questions = [json.loads(line)["query"] for line in args.questions.read_text().splitlines() if line.strip()]
    warm = WarmIndexes(args.home)
    warm.warm(args.name)
    samples = []
    begun = time.perf_counter()
    print(
        f"pool {os.environ.get('ARROW_DEFAULT_MEMORY_POOL', 'default')}, trim every {args.trim_every or 'never'}",
        flush=True,
    )
    for number in range(args.searches + 1):
        if number % args.every == 0:
            samples.append({"searches": number, "s": round(time.perf_counter() - begun, 1), **memory()})
            print("  ".join(f"{key} {value}" for key, value in samples[-1].items()), flush=True)
        if number == args.searches:
            break
        warm.search(SearchRequest(query=questions[number % len(questions)], index=args.name, k=10))
        if args.trim_every and (number + 1) % args.trim_every == 0:
            _LIBC.malloc_trim(0)
    warm._thread.shutdown()
    if args.out:
        report = {
            **machine_meta(),
            "commit": git("rev-parse", "--short", "HEAD"),
            "index": args.name,
            "questions": portable_path(args.questions),
            "arrow_pool": os.environ.get("ARROW_DEFAULT_MEMORY_POOL", "default"),
            "trim_every": args.trim_every,
            "samples": samples,
        }
        (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=1) + "\n")
        write_report(RESULTS / f"{args.out}.md", render(report))


def render(report: dict) -> str:
    rows = "".join(
        f"| {row['searches']:,} | {row['s']} | {row['rss']} | {row['anon']} | {row['file']} | {row['arena_mb']} | {row['arena_free']} | "
        f"{row['mmapped']} |\n"
        for row in report["samples"]
    )
    return (
        f"# A warm service's memory over its searches\n\n{report['cpus']} cores ({report['cpu']}), Python {report['python']}, "
        f"{report['date']}, commit {report['commit']}, a shared machine. `benchmarks/service_memory.py`: one thread calls "
        f"`WarmIndexes.search` (what both service doors call) on index `{report['index']}`, the questions of "
        f"`{report['questions']}` in turn, k=10; arrow pool {report['arrow_pool']}, malloc_trim every "
        f"{report['trim_every'] or 'never'}. MB: the process's RSS, its anonymous and file-backed parts (/proc/self/status), "
        f"what glibc's arenas hold from the system and how much of it is free (malloc_info), and glibc's mmapped blocks.\n\n"
        f"| searches | s | RSS | anonymous | file-backed | arenas | free in arenas | mmapped |\n|---|---|---|---|---|---|---|---|\n{rows}"
    )


if __name__ == "__main__":
    main()

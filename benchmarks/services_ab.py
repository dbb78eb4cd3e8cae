"""The MCP and HTTP doors of several checkouts side by side in one run: each round asks every checkout's ``ctxrag
mcp`` (with the MCP SDK's Python client and, where node and npm are, its TypeScript client: the one Claude Code builds
on) and ``ctxrag serve-search`` the same N new questions, one at a time, in turn (A, B, A, B, ...), on a fresh copy
of that checkout's built cookbook index. Each checkout's server runs its own code (``PYTHONPATH`` = the checkout,
with its ``.venv``'s Python where it has one); the clients are this checkout's. Reports each door's p50 per round,
the medians over rounds and each checkout's ratio to the first.

    python benchmarks/services_ab.py --scratch DIR --tree base /path/to/old-checkout /path/to/its-built-home \\
        --tree now . /path/to/built-home [--rounds 3] [--queries 100] [--out services_ab]

A built home is a ``CTXRAG_HOME`` holding the cookbook index ``codebase`` made by that checkout (``benchmarks/
services.py --home`` builds one in ``HOME/built``). Writes benchmarks/results/OUT.md (and .json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import httpx
from common import RESULTS, git, machine_meta, private_env, write_report
from services import QUESTIONS, WARM_QUERY, fresh_home, http_latency, mcp_latency, percentiles, start_http

NODE_SDK = "@modelcontextprotocol/sdk@1.32.2"
NODE_CLIENT = Path(__file__).with_name("mcp_node_client.mjs")


def server_command(tree: Path) -> list[str]:
    """The command that runs ``tree``'s ctxrag: its own venv's Python where it has one."""
    python = tree / ".venv" / "bin" / "python"
    return [str(python if python.is_file() else Path(sys.executable)), "-c", "from ctxrag.cli import main; main()"]


def node_client(scratch: Path) -> Path | None:
    """The TypeScript client's script beside its SDK, installed from npm into ``scratch`` once; None without npm."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return None
    folder = scratch / "node-client"
    if not (folder / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text('{"type": "module", "private": true}\n')
        installed = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--cache", str(folder / ".npm"), NODE_SDK],
            cwd=folder,
            capture_output=True,
            text=True,
        )
        if installed.returncode != 0:
            print(f"the TypeScript client is not measured: npm install {NODE_SDK} failed: {installed.stderr[-500:]}")
            return None
    shutil.copy(NODE_CLIENT, folder / NODE_CLIENT.name)
    return folder / NODE_CLIENT.name


def node_latency(script: Path, server: list[str], env: dict[str, str], count: int) -> dict:
    done = subprocess.run(
        ["node", str(script), str(QUESTIONS), str(count), WARM_QUERY, *server, "mcp", "--name", "codebase"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {**percentiles(found["times"]), "errors": found["errors"]}


def one_round(label: str, tree: Path, built: Path, scratch: Path, queries: list[str], script: Path | None) -> dict:
    """One checkout's doors, each on a fresh copy of its built home: p50/p99 per door."""
    server = server_command(tree)
    copy = scratch / f"{label}-home"

    def env() -> dict[str, str]:
        return private_env(fresh_home(built, copy), PYTHONPATH=str(tree))

    row = {"mcp_python": mcp_latency(copy, queries, server=server, env=env())}
    if script is not None:
        row["mcp_typescript"] = node_latency(script, server, env(), len(queries))
    home_env = env()
    process, url = start_http(copy, server=server, env=home_env, no_token=token_off(server, home_env))
    try:
        with httpx.Client(timeout=60) as client:
            row["http"] = http_latency(client, url, queries)
    finally:
        process.terminate()
        process.wait(60)
    shutil.rmtree(copy, ignore_errors=True)
    return row


def token_off(server: list[str], env: dict[str, str]) -> list[str]:
    """``--no-token`` where the checkout's serve-search has it (an older one had no token)."""
    shown = subprocess.run([*server, "serve-search", "--help"], env=env, capture_output=True, text=True).stdout
    return ["--no-token"] if "--no-token" in shown else []


DOORS = {"mcp_python": "MCP, Python client", "mcp_typescript": "MCP, TypeScript client", "http": "HTTP (httpx)"}


def summary(rounds: list[dict], labels: list[str]) -> dict[str, dict[str, float]]:
    """Each door's median over rounds of its p50, per checkout."""
    return {
        door: {
            label: round(statistics.median(row[door]["p50_ms"] for row in rounds if row["tree"] == label), 2)
            for label in labels
        }
        for door in DOORS
        if all(door in row for row in rounds)
    }


def render(report: dict) -> str:
    labels = [tree["label"] for tree in report["trees"]]
    first = labels[0]
    lines = [
        "# The search doors side by side",
        "",
        f"One run, {report['cpus']}-core machine ({report['cpu']}), Python {report['python']}, {report['date']}; "
        f"produced by `benchmarks/services_ab.py` (method in its docstring) at commit {report['commit']}. "
        f"{report['queries']} new questions a door, {report['rounds']} rounds, load {report['load'][0]:.1f} to "
        f"{report['load'][1]:.1f}. Checkouts: "
        + ", ".join(f"{tree['label']} = {tree['commit']}" for tree in report["trees"])
        + ".",
        "",
        "| door | "
        + " | ".join(f"{label} p50 ms" for label in labels)
        + " | "
        + " | ".join(f"{label} / {first}" for label in labels[1:])
        + " | p50 ms per round |",
        "|---|" + "---:|" * (2 * len(labels) - 1) + "---|",
    ]
    for door, medians in report["summary"].items():
        per_round = "; ".join(
            ", ".join(
                f"{row['tree']} {row[door]['p50_ms']:.1f}" for row in report["measured"] if row["round"] == number
            )
            for number in range(1, report["rounds"] + 1)
        )
        lines.append(
            f"| {DOORS[door]} | "
            + " | ".join(f"{medians[label]:.2f}" for label in labels)
            + " | "
            + " | ".join(f"{medians[label] / medians[first]:.2f}" for label in labels[1:])
            + f" | {per_round} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scratch", type=Path, required=True, help="a folder for the copies and the npm client")
    parser.add_argument("--tree", nargs=3, action="append", metavar=("LABEL", "CHECKOUT", "BUILT_HOME"), required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--out", default="services_ab")
    args = parser.parse_args()
    questions = [json.loads(line)["query"] for line in QUESTIONS.read_text().splitlines() if line.strip()]
    queries = questions[: args.queries]
    script = node_client(args.scratch)
    trees = [(label, Path(tree).resolve(), Path(built).resolve()) for label, tree, built in args.tree]
    rounds: list[dict] = []
    loads = [os.getloadavg()[0]]
    for number in range(1, args.rounds + 1):
        for label, tree, built in trees:
            row = {"round": number, "tree": label, **one_round(label, tree, built, args.scratch, queries, script)}
            rounds.append(row)
            loads.append(os.getloadavg()[0])
            print(
                json.dumps({key: value["p50_ms"] if isinstance(value, dict) else value for key, value in row.items()})
            )
    report = {
        **machine_meta(),
        "commit": git("rev-parse", "--short", "HEAD"),
        "trees": [
            {"label": label, "commit": git("-C", str(tree), "rev-parse", "--short", "HEAD")} for label, tree, _ in trees
        ],
        "queries": len(queries),
        "rounds": args.rounds,
        "load": [min(loads), max(loads)],
        "summary": summary(rounds, [label for label, _, _ in trees]),
        "measured": rounds,
    }
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=2) + "\n")
    write_report(RESULTS / f"{args.out}.md", render(report))


if __name__ == "__main__":
    main()

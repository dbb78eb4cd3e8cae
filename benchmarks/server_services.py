"""What the local Prefect server's services cost at start, and what the UI gets from them (issue: the local server).

    .venv/bin/python benchmarks/server_services.py [--repeats 3] [--out benchmarks/results]

Each configuration starts ``prefect server start`` on 127.0.0.1 in a fresh PREFECT_HOME whose database is a copy of
one migrated, empty database (so migrations are not timed), with the environment ctxrag gives its daemon
(``server_process.server_environment``) and the services switched as listed; records the seconds to a healthy
``/api/health``, then runs a flow of three tasks against it and counts the task runs the server recorded, then the
server's RSS and its CPU over 10 idle seconds. Configurations alternate within each repeat; medians are reported.
Writes server_services.md and .json. Public tools only (subprocess, urllib, psutil).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

from common import RESULTS, cpu_model, write_report  # benchmarks/common.py
from ctxrag.prefect_commands.server_process import SERVICES_OFF, SERVICES_ON, answers, choose_port, server_environment, terminate  # noqa: E402
from ctxrag.prefect_commands.server_template import make_template  # noqa: E402

FLOW = "from prefect import flow, task\n@task\ndef a(x): return x + 1\n@flow\ndef f():\n    return [a(i) for i in range(3)]\nf()\n"
ALL = SERVICES_ON + SERVICES_OFF


def configurations() -> dict[str, tuple[list[str], dict[str, str]]]:
    """Name -> (extra `prefect server start` arguments, service switches)."""
    only = {f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in ALL}
    chosen = {f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "true" for name in SERVICES_ON}
    every = {f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "true" for name in ALL}
    configs = {"--no-services (the previous release)": (["--no-services"], {}), "ctxrag's services": ([], {**only, **chosen}),
               "every service": ([], every)}
    for name in SERVICES_ON:
        configs[f"ctxrag's services without {name.lower()}"] = ([], {**only, **chosen, f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false"})
    return configs


def post(url: str, path: str) -> object:
    request = urllib.request.Request(f"{url}{path}", data=b"{}", headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def measure(template: Path, args: list[str], switches: dict[str, str]) -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix="ctxrag-services-"))
    try:
        shutil.copyfile(template, home / "prefect.db")
        port = choose_port(4200)
        url = f"http://127.0.0.1:{port}/api"
        env = {**server_environment(home), **switches}
        started = time.perf_counter()
        with (home / "server.log").open("wb") as log:
            server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port), *args],
                                      env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=home)
        try:
            while not answers(url, timeout=1.0):
                if server.poll() is not None or time.perf_counter() - started > 120:
                    raise SystemExit(f"the server did not start: {(home / 'server.log').read_text()[-2000:]}")
                time.sleep(0.05)
            up = time.perf_counter() - started
            subprocess.run([sys.executable, "-c", FLOW], env={**env, "PREFECT_API_URL": url}, capture_output=True, check=True, timeout=300)
            time.sleep(3)  # the recorder works through the events
            task_runs = post(url, "/task_runs/count")
            process = psutil.Process(server.pid)
            before = sum(process.cpu_times()[:2])
            time.sleep(10)
            idle = sum(process.cpu_times()[:2]) - before
            rss = sum(p.memory_info().rss for p in [process, *process.children(recursive=True)]) / 2**20
        finally:
            terminate(server.pid)
        return {"start_seconds": up, "task_runs": float(task_runs), "idle_cpu_seconds_per_10s": idle, "rss_mb": rss}  # type: ignore[arg-type]
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ctxrag-services-template-"))
    os.environ["CTXRAG_CACHE_DIR"] = str(scratch)
    template = scratch / "prefect" / "template.db"
    if not make_template(template, server_environment(scratch)):
        raise SystemExit("could not migrate a template database")
    configs = configurations()
    load_before = round(os.getloadavg()[0], 2)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    for repeat in range(args.repeats):
        for name, (extra, switches) in configs.items():
            runs[name].append(measure(template, extra, switches))
            print(f"{repeat + 1}/{args.repeats} {name}: {runs[name][-1]}", file=sys.stderr, flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    medians = {name: {key: statistics.median(run[key] for run in found) for key in found[0]} for name, found in runs.items()}
    import prefect

    meta = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(), "cpus": os.cpu_count(), "prefect": prefect.__version__,
            "repeats": args.repeats, "load_before": load_before, "load_after": round(os.getloadavg()[0], 2)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "server_services.json").write_text(json.dumps({"meta": meta, "medians": medians, "runs": runs}, indent=2))
    base = medians["--no-services (the previous release)"]["start_seconds"]
    lines = ["# The local Prefect server's services: start cost and what the UI gets", "",
             f"`benchmarks/server_services.py`, {meta['date']}, Prefect {meta['prefect']}, {meta['cpus']} CPUs ({meta['cpu']}); "
             f"load average {meta['load_before']} before, {meta['load_after']} after; "
             f"median of {args.repeats} starts each, configurations alternating. Start = seconds to a healthy /api/health on "
             "a migrated database; task runs = what the server recorded of a 3-task flow; idle CPU over 10 s; RSS of the "
             "server's processes.", "",
             "| configuration | start s | vs --no-services | task runs recorded | idle CPU s / 10 s | RSS MB |", "|---|---:|---:|---:|---:|---:|"]
    for name, row in medians.items():
        lines.append(f"| {name} | {row['start_seconds']:.2f} | {row['start_seconds'] / base:.2f}x | {row['task_runs']:.0f} | "
                     f"{row['idle_cpu_seconds_per_10s']:.2f} | {row['rss_mb']:.0f} |")
    lines += ["", f"ctxrag's services: {', '.join(name.lower() for name in SERVICES_ON)} on; off: "
              f"{', '.join(name.lower() for name in SERVICES_OFF)} (they serve deployments, workers and automations, "
              "which need a server of the user's own).", ""]
    write_report(args.out / "server_services.md", "\n".join(lines))


if __name__ == "__main__":
    main()

"""Screenshot of a ctxrag run in the Prefect UI, for the docs (needs /usr/bin/chromium and Playwright, a test extra).

Indexes the sample corpus with ``ctxrag index`` as a new user runs it (no PREFECT_API_URL, a scratch CTXRAG_HOME and
PREFECT_HOME), so the run lands on the local server ctxrag starts; screenshots the flow run page (or the index
artifact's page) with headless Chromium once it shows the run's name and its task runs, and stops the server::

    .venv/bin/python scripts/ui_screenshot.py [--out docs/prefect-ui.png] [--page run|artifact]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.equipment.browser import browser_missing, page_text  # noqa: E402
from tests.equipment.local_server import ctxrag_as_user, home_auth, recorded_server, stopped_afterwards  # noqa: E402


def latest_index_run(api_url: str, auth_string: str) -> tuple[str, str]:
    """(id, name) of the newest completed ctxrag-index flow run on the server."""
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with SyncPrefectClient(api_url, auth_string=auth_string) as client:
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["ctxrag-index"])), sort=FlowRunSort.START_TIME_DESC
        )
    completed = [run for run in runs if run.state is not None and run.state.is_completed()]
    if not completed:
        raise SystemExit("no completed ctxrag-index run on the server")
    return str(completed[0].id), completed[0].name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "prefect-ui.png")
    parser.add_argument("--page", choices=["run", "artifact"], default="run")
    parser.add_argument(
        "--name", default="sample", help="Index name of the sample run (its artifact: ctxrag-index-NAME)."
    )
    parser.add_argument(
        "--wait-seconds", type=float, default=60.0, help="How long the page may take to show the run's name."
    )
    args = parser.parse_args()
    if (reason := browser_missing()) is not None:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="ctxrag-screenshot-") as scratch,
        stopped_afterwards(Path(scratch) / "prefect") as prefect_home,
    ):
        print(f"indexing data/sample/corpus as {args.name!r} on the local server", file=sys.stderr)
        run = ctxrag_as_user(
            Path(scratch) / "home", prefect_home, "index", "data/sample/corpus", "--name", args.name, timeout=600
        )
        if run.returncode != 0:
            print(run.stderr[-3000:], file=sys.stderr)
            return 1
        api_url = recorded_server(prefect_home)["api_url"]
        auth = home_auth(prefect_home)  # what the UI's login takes
        run_id, run_name = latest_index_run(api_url, auth)
        page = (
            f"/runs/flow-run/{run_id}"
            if args.page == "run"
            else f"/artifacts/key/ctxrag-index-{args.name}".replace("_", "-")
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.unlink(missing_ok=True)
        ui_url = api_url.removesuffix("/api")
        text = page_text(
            f"{ui_url}{page}",
            run_name,
            wait_seconds=args.wait_seconds,
            screenshot=args.out.resolve(),
            auth_string=auth,
            settle_seconds=5.0,
        )
        if run_name not in text:
            print(
                f"the page did not show {run_name!r} within {args.wait_seconds:.0f} s (screenshot kept): {text[:1000]}",
                file=sys.stderr,
            )
            return 1
    print(f"{args.out}\t{run_name}\t{page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

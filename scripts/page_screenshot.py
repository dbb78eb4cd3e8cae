"""Screenshot of the search page ``ctxrag serve-search`` serves at ``/``, for the docs (needs /usr/bin/chromium and
Playwright, a test extra).

As a new user does it, in a scratch CTXRAG_HOME and PREFECT_HOME: ``ctxrag index data/sample/corpus``, ``ctxrag
evaluate data/sample/questions.jsonl`` (so the page has an evaluation to show), ``ctxrag serve-search`` with its
default token; then headless Chromium opens the page, gives the token as a user pastes it, asks a question, opens the
first hit's lines and saves the window as a PNG. Everything it started is stopped::

    .venv/bin/python scripts/page_screenshot.py [--out docs/search-page.png] [--query "how are retries delayed?"]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.equipment.browser import CHROMIUM, browser_missing  # noqa: E402
from tests.equipment.local_server import ctxrag_as_user, stopped_afterwards, user_env  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
WAIT_MS = 120_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen[bytes], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if process.poll() is not None:
            raise SystemExit(f"serve-search ended with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/page.css", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"serve-search did not answer in {seconds:.0f} s") from None
            time.sleep(0.3)


def shoot(url: str, token: str, query: str, out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{url}/")
            expect(page.locator("#token")).to_be_focused(timeout=WAIT_MS)
            page.keyboard.type(token)
            page.keyboard.press("Enter")
            expect(page.locator("#query")).to_be_focused(timeout=WAIT_MS)
            page.keyboard.type(query)
            page.keyboard.press("Enter")
            expect(page.locator("#summary")).to_contain_text("hits in", timeout=WAIT_MS)
            expect(page.locator("#evaluation img.chart")).to_be_visible(timeout=WAIT_MS)
            page.locator(".hit button[aria-expanded]").first.click()
            expect(page.locator(".lines .code").first).to_be_visible(timeout=WAIT_MS)
            page.locator("#query").focus()  # the shot starts at the top, the question box focused
            page.evaluate("window.scrollTo(0, 0)")
            page.wait_for_timeout(500)
            page.screenshot(path=str(out))
        finally:
            browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "search-page.png")
    parser.add_argument("--query", default="how are retries delayed?")
    args = parser.parse_args()
    if (reason := browser_missing()) is not None:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="ctxrag-screenshot-") as scratch,
        stopped_afterwards(Path(scratch) / "prefect") as prefect_home,
    ):
        home = Path(scratch) / "home"
        for step in (
            ["index", "data/sample/corpus", "--name", "sample"],
            ["evaluate", "data/sample/questions.jsonl", "--name", "sample"],
        ):
            print(f"ctxrag {' '.join(step)}", file=sys.stderr)
            done = ctxrag_as_user(home, prefect_home, *step, timeout=900)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
        port = free_port()
        command = [sys.executable, "-c", "from ctxrag.cli import main; main()", "serve-search", "--name", "sample"]
        server = subprocess.Popen(
            [*command, "--port", str(port)], env=user_env(home, prefect_home), cwd=REPO, stdout=subprocess.DEVNULL
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_up(url, server)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            shoot(url, (home / "search-token").read_text().strip(), args.query, args.out.resolve())
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

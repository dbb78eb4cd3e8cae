"""The search page in a real browser (Debian's Chromium driven by Playwright), as a keyboard-only user meets it:
``ctxrag serve-search`` as a program, private by default; the page asks for the token, then a question typed and
Enter show the hits grouped by file with the matched words marked, Tab reaches a hit's "Open lines" and Enter shows
the file's lines as the index holds them, Escape closes them; the index's latest evaluation shows its metrics and
chart. One server and one browser for the whole walk. Skipped, with its reason, where Chromium or Playwright is
missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from ctxrag.tasks.evaluation.report import write_chart, write_run
from ctxrag.tasks.evaluation.runs import run_folder
from tests.ctxrag.services.test_http_server import started
from tests.equipment.browser import CHROMIUM, browser_missing
from tests.helpers import SAMPLE_CORPUS

pytestmark = [pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing())), pytest.mark.browser]

WAIT_MS = 60_000  # the first search loads the model: seconds on a loaded machine
METRICS = {"bm25": {"pass@5": 0.5, "pass@10": 0.75}, "hybrid-score": {"pass@5": 0.625, "pass@10": 0.875}}
ARGS = ["--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]


def with_a_run(sample_home: Path, base: Path) -> tuple[Path, str]:
    """A copy of the sample index's home with one evaluation run of it (metrics and chart); the run's name."""
    home = base / "home"
    shutil.copytree(sample_home, home)
    folder = run_folder(home, "sample")
    config = {"index": "sample", "index_manifest": {"version": None}, "evalset": "/q/questions.jsonl",
              "format": "jsonl", "ks": [5, 10], "index_strategy": "hybrid-score"}  # fmt: skip
    write_run(folder, config, METRICS, pa.table({"query_id": ["q1"]}))
    write_chart(METRICS, folder / "chart.svg", "sample: questions.jsonl")
    return home, folder.name


def test_a_keyboard_user_asks_sees_the_hits_opens_a_file_s_lines_and_the_evaluation(
    sample_home: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    home, run = with_a_run(sample_home, tmp_path)
    on_disk = Path(SAMPLE_CORPUS, "tinyq/retry.py").read_text().splitlines()
    with started(home) as (url, start_line), sync_playwright() as playwright:
        token = (home / "search-token").read_text().strip()
        assert token not in start_line
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on(
                "console",
                lambda line: problems.append(line.text) if line.type == "error" and "401" not in line.text else None,
            )
            page.goto(f"{url}/")

            # The token, asked once: the field has the focus, Enter gives it. A wrong one is refused and asked again.
            expect(page.locator("#token")).to_be_focused(timeout=WAIT_MS)
            page.keyboard.type("not-the-token-at-all")
            page.keyboard.press("Enter")
            expect(page.locator("#token-error")).to_contain_text("refused", timeout=WAIT_MS)
            expect(page.locator("#token")).to_be_focused()
            page.keyboard.type(token)
            page.keyboard.press("Enter")

            # The question, typed where the focus is; Enter searches; the hits come grouped by file.
            expect(page.locator("#query")).to_be_focused(timeout=WAIT_MS)
            expect(page.locator("#index")).to_have_value("sample")
            page.keyboard.type("how are retries delayed with backoff?")
            page.keyboard.press("Enter")
            expect(page.locator("#summary")).to_contain_text("hits in", timeout=WAIT_MS)
            sources = page.locator("#files > li.file .source").all_inner_texts()
            assert len(sources) == len(set(sources)) and "tinyq/retry.py" in sources, sources
            first_place = page.locator(".hit .where").first.inner_text()
            assert first_place.startswith(sources[0] + ":"), (first_place, sources)
            marks = page.locator(".hit mark").all_inner_texts()
            assert marks and all(
                any(word in mark.lower() for word in ("retr", "delay", "backoff")) for mark in marks
            ), marks

            # The evaluation of the index: its metrics per strategy, the index's own in bold, and its chart.
            evaluation = page.locator("#evaluation")
            expect(evaluation.locator("tbody tr.own th")).to_have_text("hybrid-score", timeout=WAIT_MS)
            expect(evaluation).to_contain_text(run)
            expect(evaluation.locator("tbody")).to_contain_text("0.875")
            expect(evaluation.locator("img.chart")).to_be_visible(timeout=WAIT_MS)
            assert page.eval_on_selector("#evaluation img.chart", "image => image.naturalWidth") > 0

            # Tab from the question to retry.py's first "Open lines": Enter shows its lines from the index, focused.
            retry = page.locator(".hit", has=page.locator(".where", has_text="tinyq/retry.py:")).first
            opener = retry.locator("button[aria-expanded]")
            for _ in range(60):
                page.keyboard.press("Tab")
                if opener.evaluate("button => button === document.activeElement"):
                    break
            else:
                pytest.fail("Tab never reached tinyq/retry.py's 'Open lines' button")
            page.keyboard.press("Enter")
            shown = retry.locator(".lines .code")
            expect(shown).to_be_focused(timeout=WAIT_MS)
            expect(opener).to_have_attribute("aria-expanded", "true")
            head = retry.locator(".lines-head").inner_text()
            assert head.startswith("tinyq/retry.py: lines ") and f"of {len(on_disk)}" in head, head
            numbers = [int(text) for text in shown.locator(".number").all_inner_texts()]
            texts = shown.locator(".text").all_text_contents()
            assert texts == [on_disk[number - 1] for number in numbers] and len(numbers) > 1, (numbers, texts)
            assert shown.locator(".in-chunk").count() > 0

            # Escape closes them and gives the focus back to the button that opened them.
            page.keyboard.press("Escape")
            expect(retry.locator(".lines")).to_be_hidden()
            expect(opener).to_be_focused()
            expect(opener).to_have_attribute("aria-expanded", "false")
            assert not problems, problems
        finally:
            browser.close()

"""Headless Chromium (Debian's /usr/bin/chromium) driven by Playwright: a page's text once it shows what is expected.

Test equipment for the Prefect UI checks and the docs screenshots (the search page's test and script use its
``browser_missing`` and ``CHROMIUM``). Playwright drives the system browser through ``executable_path``, so nothing is
downloaded (no ``playwright install``). It waits in real time for the expected text, where Chromium's ``--dump-dom
--virtual-time-budget`` could dump the page before a late API call had filled it.
"""

from __future__ import annotations

import json
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
WAIT_SECONDS = 60.0


def browser_missing() -> str | None:
    """Why the headless-browser checks cannot run here, or None when Chromium and Playwright are both installed."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is not installed (apt-get install -y chromium): the browser tests need a headless browser"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]'): it drives the headless browser"
    return None


# A JavaScript predicate on the expected strings: the page's visible text contains every one of them.
CONTAINS_ALL = "(expected) => { const text = document.body ? document.body.innerText : ''; return expected.every((item) => text.includes(item)); }"


def page_text(
    url: str,
    *expected: str,
    wait_seconds: float = WAIT_SECONDS,
    screenshot: Path | None = None,
    settle_seconds: float = 0.0,
    auth_string: str | None = None,
) -> str:
    """The visible text of URL (whitespace collapsed) once it contains every EXPECTED string, or after WAIT_SECONDS.

    On a timeout the text is returned as it stands, so the caller's assertion shows what the page did show. With
    SCREENSHOT, the page is also saved there as a PNG (1400 x 900), SETTLE_SECONDS after the text appeared (the run
    graph is drawn on a canvas after the text). AUTH_STRING: the server's auth string, as its UI's login keeps it
    (``localStorage['prefect-password']``, the string base64-encoded) once a user has typed it there.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            if auth_string is not None:
                page.add_init_script(
                    script=f"localStorage.setItem('prefect-password', btoa({json.dumps(auth_string)}))"
                )
            page.goto(url, wait_until="load", timeout=wait_seconds * 1000)
            try:
                page.wait_for_function(CONTAINS_ALL, arg=list(expected), timeout=wait_seconds * 1000, polling=250)
            except PlaywrightTimeout:
                pass
            if screenshot is not None:
                page.wait_for_timeout(settle_seconds * 1000)
                page.screenshot(path=str(screenshot))
            return " ".join(page.inner_text("body").split())
        finally:
            browser.close()

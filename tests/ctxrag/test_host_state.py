"""ctxrag in someone else's program: ``import ctxrag`` and the public calls leave the environment, the root logger,
the warnings filters and the signal handlers as they found them."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ctxrag.host_state import as_found, keeps_host_state
from tests.equipment.local_server import leftover_servers, user_env
from tests.helpers import REPO, SAMPLE_CORPUS

HOST_PROGRAM = """
import json, logging, os, signal, sys, warnings

def state():
    root = logging.getLogger()
    return {"environ": dict(os.environ), "root": [repr(h) for h in root.handlers] + [root.level, repr(root.filters)],
            "warnings": [repr(f) for f in warnings.filters],
            "signals": {str(number): repr(signal.getsignal(number)) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}}

def changed(before, after):
    environ = sorted(k for k in before["environ"].keys() | after["environ"].keys() if before["environ"].get(k) != after["environ"].get(k))
    return {"environ": environ, **{key: after[key] for key in ("root", "warnings", "signals") if before[key] != after[key]}}

import numpy  # its own import adds warnings filters: a program that uses ctxrag has numpy loaded already
before = state()
import ctxrag
after_import = state()
ctxrag.index(sys.argv[1], name="sample")
after_index = state()
hits = ctxrag.open("sample").search("retry backoff", k=3)
after_search = state()
print(json.dumps({"import": changed(before, after_import), "index": changed(after_import, after_index),
                  "search": changed(after_index, after_search), "hits": len(hits)}))
"""


@pytest.mark.slow  # a new process indexes the sample corpus on Prefect's temporary server
def test_import_index_and_search_leave_the_host_s_process_state_as_they_found_it(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home", tmp_path / "prefect", PYTHONPATH=str(REPO))  # the API's default server
    for name in (
        "DO_NOT_TRACK",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_DISABLE_TELEMETRY",
        "TOKENIZERS_PARALLELISM",
    ):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, "-c", HOST_PROGRAM, str(SAMPLE_CORPUS)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    seen = json.loads(result.stdout.splitlines()[-1])
    assert seen == {"import": {"environ": []}, "index": {"environ": []}, "search": {"environ": []}, "hits": 3}
    assert not leftover_servers(tmp_path)


def test_as_found_puts_back_what_a_call_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXRAG_TEST_KEPT", "mine")
    monkeypatch.delenv("CTXRAG_TEST_ADDED", raising=False)
    root = logging.getLogger()
    mine = logging.NullHandler()
    root.addHandler(mine)
    level, filters, handler_previous = root.level, list(warnings.filters), signal.getsignal(signal.SIGTERM)
    try:
        with as_found():
            os.environ["CTXRAG_TEST_ADDED"] = "1"
            os.environ["CTXRAG_TEST_KEPT"] = "theirs"
            root.addHandler(logging.StreamHandler())
            mine.addFilter(logging.Filter("x"))
            root.setLevel(logging.DEBUG)
            warnings.filterwarnings("ignore", message="a library's own")
            signal.signal(signal.SIGTERM, lambda *_: None)
        assert "CTXRAG_TEST_ADDED" not in os.environ and os.environ["CTXRAG_TEST_KEPT"] == "mine"
        assert root.handlers.count(mine) == 1 and not any(type(h) is logging.StreamHandler for h in root.handlers)
        assert mine.filters == [] and root.level == level and warnings.filters == filters
        assert signal.getsignal(signal.SIGTERM) is handler_previous
    finally:
        root.removeHandler(mine)


def test_nested_calls_restore_once_at_the_outer_one_and_errors_still_restore(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXRAG_TEST_ADDED", raising=False)

    @keeps_host_state
    def inner() -> str:
        os.environ["CTXRAG_TEST_ADDED"] = "inner"
        return "done"

    @keeps_host_state
    def outer() -> None:
        assert inner() == "done" and os.environ["CTXRAG_TEST_ADDED"] == "inner"  # not restored mid-call
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        outer()
    assert "CTXRAG_TEST_ADDED" not in os.environ

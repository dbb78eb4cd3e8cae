"""Test equipment: the noida-db Elasticsearch emulator on 127.0.0.1, started once per test session.

noida-db (PyPI ``noida-db``) ships one binary that speaks the Elasticsearch REST API (it reports itself as 8.15.3).
``start_emulator`` runs that binary directly (not the ``noida-db`` Python wrapper, so stopping it stops the emulator
itself) with only its Elasticsearch service, a private data folder and a free port, waits until it answers, and
returns the process and its URL; ``_stop`` stops it. The session fixture ``es_emulator_url`` (tests/conftest.py) uses
them. Where the emulator cannot be started, the tests that use it are skipped with the reason.
It is an emulator, not Elasticsearch: nothing measured against it is a quality figure for a real cluster.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

START_TIMEOUT_SECONDS = 20.0


def _emulator_binary() -> Path | None:
    try:
        from importlib.resources import files

        binary = Path(str(files("noida_db").joinpath("noida-db.exe" if os.name == "nt" else "noida-db")))
    except (ImportError, ModuleNotFoundError):
        return None
    if not binary.is_file():
        return None
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)  # as the package's own wrapper does before running it
    return binary


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200 and "version" in json.loads(response.read())
    except (OSError, ValueError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def start_emulator(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start the emulator (three tries at a free port); returns the process and its URL, or skips."""
    binary = _emulator_binary()
    if binary is None:
        pytest.skip("the noida-db Elasticsearch emulator is not installed (pip install noida-db)")
    problem = ""
    for attempt in range(3):
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        log = data_dir / f"emulator-{attempt}.log"
        (data_dir / f"data-{attempt}").mkdir(exist_ok=True)
        with open(log, "wb") as output:
            process = subprocess.Popen(
                [
                    str(binary),
                    "start",
                    "--data-dir",
                    str(data_dir / f"data-{attempt}"),
                    "--host",
                    "127.0.0.1",
                    "--only",
                    "elasticsearch",
                    "--elasticsearch-port",
                    str(port),
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline and process.poll() is None:
            if _answers(url):
                return process, url
            time.sleep(0.1)
        _stop(process)
        tail = log.read_text(errors="replace")[-400:].strip()
        problem = f"exit code {process.returncode}; output: {tail or '(none)'}"
    pytest.skip(f"the noida-db Elasticsearch emulator could not be started: {problem}")

"""A real second OS user of this machine, for the checks that another local user reaches nothing of ctxrag's: made
with ``useradd`` when the test process may (root, with useradd and runuser present), commands run as it with
``runuser -u USER --``. ``other_user_missing()`` says why it cannot be made, for the skip.

The probe (``PROBE``) runs as that user with the system Python (standard library only) and tries, against the owner's
local server and files: reading a key (the Secret block with ``include_secrets``, the auth string's file, the
database, the ledger), listing runs, changing something (deleting the block, setting a variable), starting a run of a
deployment. It prints one JSON object: how many attempts of each kind succeeded, and each attempt's outcome.
``SEARCH_PROBE`` does the same against ``ctxrag serve-search``: every path without the token, and the token's file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

USER = "ctxrag-other"
PYTHON = "/usr/bin/python3"


def other_user_missing() -> str | None:
    """Why no second user can be made and used here, or None."""
    if os.geteuid() != 0:
        return "not root: the test cannot create a second OS user (useradd needs root)"
    for tool in ("useradd", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: no second OS user can be made"
    if not Path(PYTHON).exists():
        return f"{PYTHON} is missing: the second user's probe needs a Python of the system"
    return None


def ensure_other_user() -> str:
    """The second user's name, created now (no home, no login shell) if it does not exist."""
    if subprocess.run(["id", "-u", USER], capture_output=True).returncode != 0:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
            capture_output=True,
        )
    return USER


PROBE = r"""
import base64, json, sys, urllib.error, urllib.request
api, block_id, deployment_id, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
outcomes = {"read_key": [], "list_runs": [], "change": [], "start_run": []}

def call(kind, what, method, path, body=None, guess=None):
    headers = {"Content-Type": "application/json"}
    if guess is not None:  # a guessed auth string
        headers["Authorization"] = "Basic " + base64.b64encode(guess.encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(api + path, data=data, headers=headers, method=method), timeout=30) as r:
            outcomes[kind].append([what, r.status, True])
    except urllib.error.HTTPError as error:
        outcomes[kind].append([what, error.code, False])
    except OSError as error:
        outcomes[kind].append([what, type(error).__name__, False])

for guess in (None, "", "admin:admin"):
    call("read_key", f"secret block (auth {guess!r})", "GET", f"/block_documents/{block_id}?include_secrets=true", guess=guess)
    call("read_key", f"block list (auth {guess!r})", "POST", "/block_documents/filter?include_secrets=true", {}, guess=guess)
    call("list_runs", f"flow runs (auth {guess!r})", "POST", "/flow_runs/filter", {}, guess=guess)
    call("list_runs", f"deployments (auth {guess!r})", "POST", "/deployments/filter", {}, guess=guess)
    call("list_runs", f"logs (auth {guess!r})", "POST", "/logs/filter", {}, guess=guess)
    call("change", f"delete block (auth {guess!r})", "DELETE", f"/block_documents/{block_id}", guess=guess)
    call("change", f"set variable (auth {guess!r})", "POST", "/variables/", {"name": "planted", "value": "x"}, guess=guess)
    call("start_run", f"run deployment (auth {guess!r})", "POST", f"/deployments/{deployment_id}/create_flow_run",
         {"parameters": {"source": "/etc"}}, guess=guess)
try:  # the control: the server is there to reach
    with urllib.request.urlopen(api + "/health", timeout=30) as r:
        reached = r.status
except OSError as error:
    reached = type(error).__name__
for path in files:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
        outcomes["read_key"].append([f"file {path}", "read", True])
    except OSError as error:
        outcomes["read_key"].append([f"file {path}", type(error).__name__, False])
print(json.dumps({"health": reached, "succeeded": {kind: sum(1 for *_, ok in items if ok) for kind, items in outcomes.items()},
                  "attempts": {kind: len(items) for kind, items in outcomes.items()}, "outcomes": outcomes}))
"""


def probe_as_other_user(api_url: str, block_id: str, deployment_id: str, files: list[Path]) -> dict:
    """Run ``PROBE`` as the second user; its JSON report."""
    result = subprocess.run(
        [
            "runuser",
            "-u",
            ensure_other_user(),
            "--",
            PYTHON,
            "-c",
            PROBE,
            api_url,
            block_id,
            deployment_id,
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)  # type: ignore[no-any-return]


SEARCH_PROBE = r"""
import base64, json, sys, urllib.error, urllib.request
url, token_file = sys.argv[1], sys.argv[2]
outcomes = {"search": [], "read_token": []}
guesses = [None, "", "Bearer ", "Bearer null", "Bearer " + "A" * 43, "Basic " + base64.b64encode(b"ctxrag:").decode()]
requests = [("GET", "/indexes", None), ("POST", "/search", {"query": "retry", "k": 3}), ("GET", "/openapi.json", None),
            ("GET", "/docs", None), ("GET", "/health", None)]
for method, path, body in requests:
    for guess in guesses:
        headers = {"Content-Type": "application/json"}
        if guess is not None:
            headers["Authorization"] = guess
        data = None if body is None else json.dumps(body).encode()
        what = f"{method} {path} (authorization {guess!r})"
        try:
            request = urllib.request.Request(url + path, data=data, headers=headers, method=method)
            with urllib.request.urlopen(request, timeout=30) as answer:
                outcomes["search"].append([what, answer.status, True])
        except urllib.error.HTTPError as error:
            outcomes["search"].append([what, error.code, False])
        except OSError as error:
            outcomes["search"].append([what, type(error).__name__, False])
try:
    with open(token_file, "rb") as handle:
        handle.read(1)
    outcomes["read_token"].append([f"file {token_file}", "read", True])
except OSError as error:
    outcomes["read_token"].append([f"file {token_file}", type(error).__name__, False])
print(json.dumps({"succeeded": {kind: sum(1 for *_, ok in items if ok) for kind, items in outcomes.items()},
                  "attempts": {kind: len(items) for kind, items in outcomes.items()}, "outcomes": outcomes}))
"""


def search_probe_as_other_user(url: str, token_file: Path) -> dict:
    """Run ``SEARCH_PROBE`` as the second user against ``ctxrag serve-search`` at ``url``: each request (list, search,
    the schema and its pages, health) without a token, with an empty one, guessed ones and basic auth; then a read of
    ``token_file``. Its JSON report."""
    result = subprocess.run(
        ["runuser", "-u", ensure_other_user(), "--", PYTHON, "-c", SEARCH_PROBE, url, str(token_file)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)  # type: ignore[no-any-return]

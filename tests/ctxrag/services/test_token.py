"""The HTTP service's token: required on every address, made private in the home on first use, given by the environment
or a file instead; ``--no-token`` on loopback only; never printed. Then ``ctxrag serve-search`` as a program and as
another OS user of the machine sees it."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest

from ctxrag.services.token import HOME_TOKEN_FILE, TOKEN_VARIABLE, is_loopback, service_token
from ctxrag.storage.errors import InvalidInput
from tests.ctxrag.services.conftest import CTXRAG, service_env
from tests.ctxrag.services.test_http_server import GOOD, free_port, started
from tests.equipment.other_user import other_user_missing, search_probe_as_other_user


@pytest.fixture
def no_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.com", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.usefixtures("no_variable")
@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_by_default_a_token_is_made_once_in_the_home_private_from_creation(tmp_path: Path, host: str) -> None:
    home = tmp_path / "home"
    old = os.umask(0o022)  # a user's usual umask: the modes below are ctxrag's own, not the test's
    try:
        made = service_token(host, None, home)
    finally:
        os.umask(old)
    path = home / HOME_TOKEN_FILE
    assert made.value and len(made.value) >= 40 and made.value not in made.says and made.value not in repr(made)
    assert f"token in {path}" in made.says and "Authorization: Bearer TOKEN" in made.says
    assert _mode(home) == 0o700 and _mode(path) == 0o600 and path.read_text().strip() == made.value
    assert service_token(host, None, home) == made  # made once, then reused


@pytest.mark.usefixtures("no_variable")
def test_a_home_token_file_others_can_read_or_a_link_is_refused_without_showing_it(tmp_path: Path) -> None:
    made = service_token("127.0.0.1", None, tmp_path).value
    path = tmp_path / HOME_TOKEN_FILE
    os.chmod(path, 0o644)
    with pytest.raises(InvalidInput, match="can be read by others") as refused:
        service_token("127.0.0.1", None, tmp_path)
    assert made and made not in str(refused.value)
    path.unlink()
    elsewhere = tmp_path / "planted"
    elsewhere.write_text("a-token-someone-else-chose\n")
    os.chmod(elsewhere, 0o600)
    path.symlink_to(elsewhere)
    with pytest.raises(InvalidInput, match="cannot read the token file"):
        service_token("127.0.0.1", None, tmp_path)


@pytest.mark.usefixtures("no_variable")
def test_a_home_where_no_token_can_be_made_says_how_to_give_one(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(InvalidInput, match="cannot make the service's token there.*--token-file PATH or set"):
        service_token("127.0.0.1", None, tmp_path / "a-file" / "home")


def test_the_variable_wins_and_no_token_is_for_loopback_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    opened = service_token("127.0.0.1", None, tmp_path, no_token=True)
    assert opened.value is None and "every local user of this machine can search it" in opened.says
    assert not (tmp_path / HOME_TOKEN_FILE).exists()
    with pytest.raises(InvalidInput, match="other machines can reach always needs a token"):
        service_token("0.0.0.0", None, tmp_path, no_token=True)
    with pytest.raises(InvalidInput, match="--no-token, but --token-file is given"):
        service_token("127.0.0.1", tmp_path / "token", tmp_path, no_token=True)
    monkeypatch.setenv(TOKEN_VARIABLE, "short")
    with pytest.raises(InvalidInput, match="shorter than"):
        service_token("0.0.0.0", None, tmp_path)
    monkeypatch.setenv(TOKEN_VARIABLE, "a-long-enough-token")
    assert service_token("0.0.0.0", tmp_path / "token", tmp_path).value == "a-long-enough-token"
    with pytest.raises(InvalidInput, match=f"--no-token, but \\${TOKEN_VARIABLE} is set"):
        service_token("127.0.0.1", None, tmp_path, no_token=True)
    assert not (tmp_path / HOME_TOKEN_FILE).exists() and not (tmp_path / "token").exists()


@pytest.mark.usefixtures("no_variable")
def test_a_token_file_is_generated_private_then_read_and_refused_once_others_can_read_it(tmp_path: Path) -> None:
    path = tmp_path / "token"
    made = service_token("0.0.0.0", path, tmp_path / "home").value
    assert made and len(made) >= 32 and _mode(path) == 0o600 and not (tmp_path / "home").exists()
    assert service_token("0.0.0.0", path, tmp_path / "home").value == made
    os.chmod(path, 0o640)
    with pytest.raises(InvalidInput, match="can be read by others") as refused:
        service_token("0.0.0.0", path, tmp_path / "home")
    assert made not in str(refused.value)


# --- ctxrag serve-search as a program, and as another user of the machine, sees it ------------------------------------


@pytest.mark.slow
def test_serve_search_requires_the_homes_token_on_loopback_and_its_start_line_says_where_it_is(
    sample_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    shutil.copytree(sample_home, home)
    env = service_env(home)
    env.pop(TOKEN_VARIABLE, None)
    with started(home, env=env) as (url, start_line):
        token = (home / HOME_TOKEN_FILE).read_text().strip()
        assert start_line.startswith(f"serving search and its page on {url} (")  # the page: GET / in a browser
        assert f"(token in {home / HOME_TOKEN_FILE}; clients send 'Authorization: Bearer TOKEN')" in start_line
        assert token not in start_line and _mode(home / HOME_TOKEN_FILE) == 0o600
        for path in ("/health", "/indexes", "/openapi.json", "/docs"):
            assert httpx.get(f"{url}{path}").status_code == 401, path
        assert httpx.post(f"{url}/search", json=GOOD).status_code == 401
        answer = httpx.post(f"{url}/search", json=GOOD, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200 and len(answer.json()["hits"]) == 2
    with started(home, "--no-token", env=env) as (url, start_line):
        assert "(no token: every local user of this machine can search it)" in start_line
        assert len(httpx.post(f"{url}/search", json=GOOD).json()["hits"]) == 2
    refused = subprocess.run(
        [*CTXRAG, "serve-search", "--host", "0.0.0.0", "--no-token", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "always needs a token" in refused.stderr
    assert "serving" not in refused.stderr


@pytest.mark.slow
@pytest.mark.skipif(other_user_missing() is not None, reason=str(other_user_missing()))
def test_another_local_user_searches_nothing_without_the_token(sample_home: Path) -> None:
    shared = Path(tempfile.mkdtemp(prefix="ctxrag-shared-", dir="/tmp"))
    os.chmod(shared, 0o755)  # a folder every user may enter
    home = shared / "home"
    try:
        shutil.copytree(sample_home, home)
        os.chmod(home, 0o755)  # even an open home: only the token file's own mode keeps the token
        env = service_env(home)
        env.pop(TOKEN_VARIABLE, None)
        with started(home, env=env) as (url, _):
            token_file = home / HOME_TOKEN_FILE
            report = search_probe_as_other_user(url, token_file)
            print(f"\nsecond OS user, attempts that succeeded: {report['succeeded']} of {report['attempts']}")
            assert all(status == 401 for _, status, _ in report["outcomes"]["search"]), report["outcomes"]
            assert report["succeeded"] == {"search": 0, "read_token": 0}, report["outcomes"]
            assert report["attempts"] == {"search": 30, "read_token": 1}  # as docs/operations.md says
            owner = httpx.post(f"{url}/search", json=GOOD, headers={"Authorization": f"Bearer {_read(token_file)}"})
            assert owner.status_code == 200  # the same requests with the token are answered
        with started(home, "--no-token", env=env) as (url, _):  # the control: the probe can search an open service
            opened = search_probe_as_other_user(url, home / HOME_TOKEN_FILE)
            assert opened["succeeded"]["search"] == opened["attempts"]["search"], opened["outcomes"]
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _read(path: Path) -> str:
    return path.read_text().strip()

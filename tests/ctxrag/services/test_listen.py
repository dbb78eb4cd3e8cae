"""The HTTP service's socket is bound before it says it is serving: a taken port, an address not of this machine and a
host that does not resolve are each one line and exit code 2, from the function and from ``ctxrag serve-search``."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxrag.services.listen import display_address, listening_socket
from ctxrag.storage.errors import InvalidInput
from tests.ctxrag.services.conftest import CTXRAG

NOT_THIS_MACHINE = "192.0.2.1"  # TEST-NET-1 (RFC 5737): never a local address; binding to it sends nothing


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port of 127.0.0.1 another program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


def test_the_socket_listens_before_anyone_serves_on_it() -> None:
    listener = listening_socket("127.0.0.1", 0)
    try:
        with socket.create_connection(listener.getsockname(), timeout=5):  # waits in the backlog: no refusal
            pass
    finally:
        listener.close()


@pytest.mark.parametrize(
    "host, says",
    [
        ("127.0.0.1", "the port is in use by another program (choose another --port)"),
        (NOT_THIS_MACHINE, "the address is not one of this machine's"),
        ("no-such-host.invalid", "no such host"),
    ],
)
def test_an_address_that_cannot_be_listened_on_is_one_line(taken_port: int, host: str, says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        listening_socket(host, taken_port)
    assert str(refused.value).startswith(f"cannot listen on {host}:{taken_port}: {says}")


def test_an_ipv6_address_is_shown_in_brackets() -> None:
    assert display_address("::1", 8750) == "[::1]:8750" and display_address("127.0.0.1", 80) == "127.0.0.1:80"


@pytest.mark.parametrize("host", ["127.0.0.1", NOT_THIS_MACHINE])
def test_serve_search_on_a_taken_port_or_another_machines_address_is_one_line_and_exit_2(
    taken_port: int, host: str, tmp_path: Path
) -> None:
    env = {**os.environ, "CTXRAG_HOME": str(tmp_path / "home"), "CTXRAG_SEARCH_TOKEN": "a-test-token-of-some-length"}
    result = subprocess.run(
        [*CTXRAG, "serve-search", "--host", host, "--port", str(taken_port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: cannot listen on {host}:{taken_port}: ") and result.stderr.count("\n") == 1
    assert "serving" not in result.stderr + result.stdout and "Traceback" not in result.stderr

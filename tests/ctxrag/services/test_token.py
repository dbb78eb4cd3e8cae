"""The HTTP service's token: required beyond loopback, read from the environment or a private file, made when asked."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ctxrag.services.token import TOKEN_VARIABLE, is_loopback, service_token
from ctxrag.storage.errors import InvalidInput


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


def test_loopback_needs_no_token_and_elsewhere_one_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    assert service_token("127.0.0.1", None)[0] is None
    with pytest.raises(InvalidInput, match="a token is required"):
        service_token("0.0.0.0", None)
    monkeypatch.setenv(TOKEN_VARIABLE, "short")
    with pytest.raises(InvalidInput, match="shorter than"):
        service_token("0.0.0.0", None)
    monkeypatch.setenv(TOKEN_VARIABLE, "a-long-enough-token")
    assert service_token("0.0.0.0", None) == ("a-long-enough-token", f"${TOKEN_VARIABLE}")


def test_a_token_file_is_generated_private_then_read_and_refused_once_others_can_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    path = tmp_path / "token"
    made, _ = service_token("0.0.0.0", path)
    assert made and len(made) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert service_token("0.0.0.0", path)[0] == made
    os.chmod(path, 0o640)
    with pytest.raises(InvalidInput, match="can be read by others") as refused:
        service_token("0.0.0.0", path)
    assert made not in str(refused.value)

"""The HTTP service's bearer token: required when it listens beyond this machine, given by the user
(``CTXRAG_SEARCH_TOKEN``) or kept in a file only its owner can read (``--token-file``: read, or generated there)."""

from __future__ import annotations

import ipaddress
import os
import secrets
import stat
from pathlib import Path

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.settings import settings

TOKEN_VARIABLE = "CTXRAG_SEARCH_TOKEN"
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """True for an address of this machine only (127.0.0.0/8, ::1, ``localhost``); a name is taken as reachable."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def service_token(host: str, token_file: Path | None) -> tuple[str | None, str]:
    """The token the service requires (None: none) and where it came from; a non-loopback ``host`` without one is
    refused (``InvalidInput``). The token itself is never printed or logged."""
    given = settings().search_token
    if given is not None:
        if len(given.strip()) < MIN_TOKEN_CHARS:
            raise InvalidInput(f"{TOKEN_VARIABLE} is shorter than {MIN_TOKEN_CHARS} characters")
        return given.strip(), f"${TOKEN_VARIABLE}"
    if token_file is not None:
        return _from_file(token_file), str(token_file)
    if not is_loopback(host):
        raise InvalidInput(
            f"--host {host} is reachable from other machines: a token is required. Give --token-file PATH (read, or "
            f"generated there readable by you only) or set {TOKEN_VARIABLE}; clients send 'Authorization: Bearer TOKEN'"
        )
    return None, "none (loopback only)"


def _from_file(path: Path) -> str:
    """The token in ``path``; a new one written there (mode 0600) when it does not exist. A file others can read
    is refused."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise InvalidInput(
                f"{path}: the token file can be read by others (mode {stat.filemode(mode)}); chmod 600 it"
            ) from None
        token = path.read_text().strip()
        if len(token) < MIN_TOKEN_CHARS:
            raise InvalidInput(f"{path}: the token is shorter than {MIN_TOKEN_CHARS} characters") from None
        return token
    token = secrets.token_urlsafe(32)
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    return token

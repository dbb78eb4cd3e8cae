"""The HTTP service's bearer token, required on every address unless ``--no-token`` opts out (loopback only).

It is given by the user (``CTXRAG_SEARCH_TOKEN``, or ``--token-file PATH``: read, or made there) or else made on first
use in the home (``$CTXRAG_HOME/search-token``), like the local Prefect server's auth string: 256 random bits in a file
only its owner can read (0600 from its creation). The token itself is never printed or logged: the start line names
its file, and a client reads it from there (``"Authorization: Bearer $(cat FILE)"``).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ctxrag.storage.environment import PRIVATE_FILE, private_dirs
from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.settings import settings

TOKEN_VARIABLE = "CTXRAG_SEARCH_TOKEN"
HOME_TOKEN_FILE = "search-token"  # in CTXRAG_HOME
MIN_TOKEN_CHARS = 16
TOKEN_BYTES = 32


@dataclass(frozen=True)
class ServiceToken:
    """The token the service requires (None: none, every local user can search) and what its start line says of it."""

    value: str | None = field(repr=False)  # a repr in a log or a traceback shows no token
    says: str


def is_loopback(host: str) -> bool:
    """True for an address of this machine only (127.0.0.0/8, ::1, ``localhost``); a name is taken as reachable."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def home_token_file(home: Path) -> Path:
    return home / HOME_TOKEN_FILE


def service_token(host: str, token_file: Path | None, home: Path, no_token: bool = False) -> ServiceToken:
    """The token ``serve-search`` requires: ``CTXRAG_SEARCH_TOKEN``, else ``token_file``, else the home's (made now if
    there is none); none with ``no_token``, which only a loopback ``host`` may have (``InvalidInput`` otherwise, and
    when it contradicts a given token)."""
    given = settings().search_token
    if no_token:
        if not is_loopback(host):
            raise InvalidInput(
                f"--no-token with --host {host}: an address other machines can reach always needs a token "
                f"(drop --no-token: the home's token is used)"
            )
        if given is not None or token_file is not None:
            source = f"${TOKEN_VARIABLE} is set" if given is not None else "--token-file is given"
            raise InvalidInput(f"--no-token, but {source}: say one or the other")
        return ServiceToken(None, "no token: every local user of this machine can search it")
    usage = "clients send 'Authorization: Bearer TOKEN'"
    if given is not None:
        if len(given.strip()) < MIN_TOKEN_CHARS:
            raise InvalidInput(f"{TOKEN_VARIABLE} is shorter than {MIN_TOKEN_CHARS} characters")
        return ServiceToken(given.strip(), f"token from ${TOKEN_VARIABLE}; {usage}")
    if token_file is not None:
        return ServiceToken(_private_token(token_file, follow_links=True), f"token in {token_file}; {usage}")
    path = home_token_file(home)
    try:
        private_dirs(home)
        value = _private_token(path, follow_links=False)
    except OSError as error:
        raise InvalidInput(
            f"{path}: cannot make the service's token there ({error.strerror or error}); give --token-file PATH or "
            f"set {TOKEN_VARIABLE}"
        ) from None
    return ServiceToken(value, f"token in {path}; {usage}")


def _private_token(path: Path, follow_links: bool) -> str:
    """The token in ``path``, made there now (mode 0600 from its creation) when there is no such file. A file another
    user owns, or that others may read or write, is refused; so is a link, unless ``follow_links``."""
    no_follow = 0 if follow_links else os.O_NOFOLLOW
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | no_follow, PRIVATE_FILE)
    except FileExistsError:
        return _read(path, no_follow)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_urlsafe(TOKEN_BYTES) + "\n")
    return _read(path, no_follow)


def _read(path: Path, no_follow: int) -> str:
    try:
        descriptor = os.open(path, os.O_RDONLY | no_follow)
    except OSError as error:
        raise InvalidInput(f"{path}: cannot read the token file ({error.strerror or error})") from None
    with os.fdopen(descriptor) as handle:
        status = os.fstat(handle.fileno())
        if status.st_uid != os.getuid() or status.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise InvalidInput(
                f"{path}: the token file can be read by others or is not yours (mode {stat.filemode(status.st_mode)}, "
                f"owner uid {status.st_uid}); chmod 600 it, or delete it and a new one is made"
            )
        token = handle.read().strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise InvalidInput(f"{path}: the token is shorter than {MIN_TOKEN_CHARS} characters")
    return token

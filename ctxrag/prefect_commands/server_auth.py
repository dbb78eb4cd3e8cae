"""The local server's auth string: Prefect's own API authentication (``PREFECT_SERVER_API_AUTH_STRING`` on the server,
``PREFECT_API_AUTH_STRING`` for its clients, HTTP basic auth), so no other user of the machine can read, change or
start anything on the server ctxrag starts (docs/operations.md, "Who can reach the local server").

The string is random, made once per ``PREFECT_HOME`` and kept there in a file only its owner can read (0600, created
so). It reaches the server and the clients by environment, never a command line (world-readable in ``ps``), and is
never printed: what is shown is the file's path, or a shell line that reads it (``export_line``).
"""

from __future__ import annotations

import base64
import os
import secrets
import shlex
import stat
from pathlib import Path

from ctxrag.storage.environment import PRIVATE_FILE, private_dirs
from ctxrag.storage.errors import UserError

AUTH_FILE = "ctxrag-api-auth-string"  # in PREFECT_HOME
SERVER_VARIABLE, CLIENT_VARIABLE = "PREFECT_SERVER_API_AUTH_STRING", "PREFECT_API_AUTH_STRING"
TOKEN_BYTES = 32  # 256 random bits, URL-safe text (no ':' or quote to trip a shell or a basic-auth parser)


def auth_file(home: Path) -> Path:
    return home / AUTH_FILE


def read_auth_string(home: Path) -> str | None:
    """The home's auth string (None when there is none yet); a file other users may read or write is refused."""
    path = auth_file(home)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UserError(
            f"cannot read the local Prefect server's auth string {path}: {error.strerror or error}"
        ) from None
    with os.fdopen(descriptor) as handle:
        status = os.fstat(handle.fileno())
        if status.st_uid != os.getuid() or status.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise UserError(
                f"{path} (the local Prefect server's auth string) can be read or changed by another user "
                f"(mode {stat.filemode(status.st_mode)}, owner uid {status.st_uid}); stop the server (`ctxrag server "
                f"stop`), delete the file, and the next command makes a new one"
            )
        value = handle.read().strip()
    if not value:
        raise UserError(
            f"{path} (the local Prefect server's auth string) is empty; stop the server (`ctxrag server stop`) "
            f"and delete the file: the next command makes a new one"
        )
    return value


def ensure_auth_string(home: Path) -> str:
    """The home's auth string, made now (0600 from its creation, never rewritten) if there is none."""
    if (value := read_auth_string(home)) is not None:
        return value
    private_dirs(home)
    try:
        descriptor = os.open(auth_file(home), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE)
    except FileExistsError:  # another command made it meanwhile
        return read_auth_string(home) or ""
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_urlsafe(TOKEN_BYTES) + "\n")
    return read_auth_string(home) or ""


def basic_authorization(auth_string: str) -> str:
    """The ``Authorization`` header value Prefect's clients send for an auth string."""
    return "Basic " + base64.b64encode(auth_string.encode("utf-8")).decode("ascii")


def export_line(api_url: str, home: Path) -> str:
    """The one shell line that points Prefect's own commands at the local server: the auth string is read from its
    file by the shell, so the line itself holds no secret."""
    return f'export PREFECT_API_URL={api_url} {CLIENT_VARIABLE}="$(cat {shlex.quote(str(auth_file(home)))})"'

"""The HTTP service's listening socket, made before anything says it is serving: a taken port or an address that is
not this machine's is one line for the user (``InvalidInput``), not a server that announces itself and then dies."""

from __future__ import annotations

import errno
import socket

from ctxrag.storage.errors import InvalidInput

BACKLOG = 2048  # uvicorn's default


def display_address(host: str, port: int) -> str:
    """``host:port`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` and listening (connections wait in its backlog until the server takes
    them), made as uvicorn makes its own (an IPv6 family for an address with ``:``, ``SO_REUSEADDR``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host.strip("[]"), port))
        listener.listen(BACKLOG)
    except OSError as error:
        listener.close()
        raise InvalidInput(f"cannot listen on {display_address(host, port)}: {_why(error)}") from None
    return listener


def _why(error: OSError) -> str:
    if isinstance(error, socket.gaierror):
        return f"no such host ({error.strerror or error})"
    if error.errno == errno.EADDRINUSE:
        return "the port is in use by another program (choose another --port)"
    if error.errno == errno.EADDRNOTAVAIL:
        return "the address is not one of this machine's (--host takes this machine's address, or 0.0.0.0 for all)"
    if error.errno == errno.EACCES:
        return "permission denied (a port below 1024 needs root: choose --port 1024 or above)"
    return error.strerror or str(error)

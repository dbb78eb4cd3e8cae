"""Shared base for the local HTTP API simulators (test equipment only).

A simulator is a ``http.server.ThreadingHTTPServer`` bound to 127.0.0.1 on a free
port and served from a daemon thread. It records every request, can be told to
fail the next N requests with a chosen status (and ``retry-after`` header), and
can add a fixed latency. Subclasses implement :meth:`SimulatorServer.handle`
(the API contract) and :meth:`SimulatorServer.error_body` (the API's error JSON
shape). Nothing here is a source of quality figures.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["RecordedRequest", "Reply", "SimulatorServer"]


@dataclass
class RecordedRequest:
    """One request as the simulator saw it (headers have lowercase keys)."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    status: int | None = None  # the status the simulator answered with


@dataclass
class Reply:
    """What a handler returns: a JSON body (or raw bytes), or a stream of byte chunks."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterable[bytes] | None = None  # e.g. server-sent events; sent without Content-Length


class SimulatorServer:
    """Base class: lifecycle, recording, injected failures and latency."""

    #: Path prefix appended to ``http://127.0.0.1:PORT`` to form :attr:`url`.
    base_path: str = ""

    def __init__(self, *, latency_seconds: float = 0.0) -> None:
        self.latency_seconds = latency_seconds
        self.requests: list[RecordedRequest] = []
        self._failures: list[tuple[int, float | None]] = []
        self._lock = threading.Lock()
        self.in_flight = 0  # requests being answered right now
        self.peak_in_flight = 0  # the most at once since the last reset()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        """The base URL to hand to the SDK (only valid while started)."""
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.base_path}"

    def start(self) -> Self:
        if self._server is not None:
            return self
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ controls
    def fail_next(self, status: int, count: int = 1, retry_after: float | None = None) -> None:
        """Answer the next ``count`` requests with ``status`` (and ``retry-after`` when given)."""
        with self._lock:
            self._failures.extend([(status, retry_after)] * count)

    def reset(self) -> None:
        """Forget recorded requests and pending injected failures."""
        with self._lock:
            self.requests.clear()
            self._failures.clear()
            self.peak_in_flight = 0

    # ------------------------------------------------------------------ subclass API
    def handle(self, request: RecordedRequest) -> Reply:  # pragma: no cover - abstract
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> Any:
        """The API's JSON error body for ``message``; override per API."""
        return {"message": message}

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        return Reply(status, self.error_body(status, message), dict(headers or {}))

    # ------------------------------------------------------------------ internals
    def _dispatch(self, request: RecordedRequest, raw_ok: bool) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return self._answer(request, raw_ok)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, request: RecordedRequest, raw_ok: bool) -> Reply:
        with self._lock:
            failure = self._failures.pop(0) if self._failures else None
        if self.latency_seconds > 0:
            time.sleep(self.latency_seconds)
        if failure is not None:
            status, retry_after = failure
            headers = {}
            if retry_after is not None:
                headers["retry-after"] = _format_seconds(retry_after)
            message = "Rate limit exceeded, please retry later." if status == 429 else "Simulated failure."
            return self.error(status, message, headers)
        if not raw_ok:
            return self.error(400, "Request body is not valid JSON.")
        try:
            return self.handle(request)
        except Exception as exc:  # a simulator bug must still produce an HTTP answer
            return self.error(500, f"Simulator error: {exc!r}")


def _format_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _make_handler(sim: SimulatorServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body: Any = None
            ok = True
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    ok = False
            headers = {k.lower(): v for k, v in self.headers.items()}
            recorded = RecordedRequest(self.command, self.path, headers, body)
            reply = sim._dispatch(recorded, ok)
            recorded.status = reply.status
            self.send_response(reply.status)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            if reply.stream is not None:
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in reply.stream:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                return
            if isinstance(reply.body, (bytes, bytearray)):
                payload = bytes(reply.body)
            else:
                payload = json.dumps(reply.body).encode()
                if not any(k.lower() == "content-type" for k in reply.headers):
                    self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _serve_while_heard(self) -> None:
            try:
                self._serve()
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout): no one to answer
                self.close_connection = True

        do_POST = do_GET = do_PUT = do_DELETE = _serve_while_heard

    return Handler

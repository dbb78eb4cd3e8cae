"""Local simulator of the Anthropic Messages API — TEST EQUIPMENT, never a source of quality figures.

It keeps the public HTTP contract so the product's real client can be pointed at it::

    with AnthropicSimulator() as sim:
        client = anthropic.Anthropic(base_url=sim.url, api_key="sk-ant-test-x", max_retries=0)

Endpoints: ``POST /v1/messages``, ``POST /v1/messages/count_tokens``, ``POST /v1/messages/batches``,
``GET /v1/messages/batches/{id}`` and ``GET /v1/messages/batches/{id}/results`` (JSONL).

Contract kept: an API key is required (``x-api-key``, or ``Authorization: Bearer`` which is what
anthropic SDK 2.x sends) else 401 ``authentication_error``; ``anthropic-version`` is required; the
body is validated (model/max_tokens/messages/system/tools/tool_choice/stop_sequences, unknown
fields, at most 4 ``cache_control`` breakpoints, ``ttl`` "5m"/"1h" with 1h before 5m) and
``temperature``/``top_p``/``top_k`` are rejected as the 2026-10-21 API version does. Errors are
``{"type":"error","error":{"type":..,"message":..},"request_id":..}`` with a ``request-id`` header.

SIMULATED token counting (:func:`simulated_token_count`): a text costs ceil(UTF-8 bytes / 4); a
non-text block (tool_use, tool_result, image, ...) or a tool definition costs ceil(bytes of its
canonical JSON / 4); every message adds 3 tokens. Nothing else. These numbers are NOT real
tokenizer counts and must never be quoted as costs.

Prompt caching follows the documented rules: the cacheable prefix is tools, then system, then
messages up to and including the last block carrying ``cache_control`` (or, with a top-level
``cache_control``, the last block). Below the model's minimum (:data:`MIN_CACHEABLE_TOKENS`)
nothing is cached. Otherwise the longest breakpoint prefix still alive is read (refreshing its
TTL) and the rest is written. Lookup happens before the simulated latency and the write after it,
so two simultaneous first requests with the same prefix both write, as on the real API.

Answers are deterministic: a context sentence naming the ``<document>``'s first words and the
``<chunk>``'s first words (plain mode), or, when ``tool_choice`` forces a tool, one ``tool_use``
block with ``{"contexts": [{"chunk_index": i, "context": ...}]}`` for each
``<chunk index="i">`` of the last user message.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.equipment import _http
from tests.equipment._http import Reply, SimulatorServer

__all__ = [
    "MIN_CACHEABLE_TOKENS",
    "AnthropicSimulator",
    "RecordedRequest",
    "min_cacheable_tokens",
    "simulated_token_count",
]

#: Minimum cacheable prefix length by model-name prefix (first match wins; default 1024).
MIN_CACHEABLE_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-0", 1024),
    ("claude-opus-4-1", 1024),
    ("claude-opus-4-2025", 1024),  # dated Opus 4.0 ids, e.g. claude-opus-4-20250514
    ("claude-opus-", 4096),  # claude-opus-4-5, claude-opus-4-6 and later
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4", 1024),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
MESSAGE_OVERHEAD_TOKENS = 3
MAX_CACHE_BREAKPOINTS = 4
ONE_HOUR_SECONDS = 3600.0
_BODY_FIELDS = frozenset(
    "model max_tokens messages cache_control container diagnostics inference_geo metadata output_config "
    "service_tier speed stop_sequences stream system thinking tool_choice tools user_profile_id".split()
)
_REMOVED_SAMPLING = ("temperature", "top_p", "top_k")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_DEFAULT_MESSAGES = {
    429: "Number of request tokens has exceeded your rate limit (simulated).",
    529: "Overloaded",
    500: "Internal server error (simulated).",
}
_DOC = re.compile(r"<document>(.*?)</document>", re.S)
_CHUNK = re.compile(r"<chunk(?:\s[^>]*)?>(.*?)</chunk>", re.S)
_INDEXED_CHUNK = re.compile(r"<chunk\s+index=\"(\d+)\"\s*>(.*?)</chunk>", re.S)
_CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_BATCH_PATH = re.compile(r"^/v1/messages/batches/([^/]+)(/results)?$")


def simulated_token_count(text: str) -> int:
    """SIMULATED token count of a text: ceil(UTF-8 bytes / 4). Not a real tokenizer."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def min_cacheable_tokens(model: str) -> int:
    """The simulator's minimum cacheable prefix length for ``model`` (see :data:`MIN_CACHEABLE_TOKENS`)."""
    return next((n for prefix, n in MIN_CACHEABLE_TOKENS if model.startswith(prefix)), 1024)


@dataclass
class RecordedRequest(_http.RecordedRequest):
    """One request as received, plus what the simulator answered (``status`` is set afterwards)."""

    usage: dict[str, Any] | None = None  # the usage answered with (messages and count_tokens)
    error_type: str | None = None  # e.g. "rate_limit_error" when answered with an error
    received_at: float = 0.0  # time.monotonic() on arrival
    responded_at: float = 0.0  # time.monotonic() when the answer was ready


class ApiError(Exception):
    """An error answer: HTTP status, Anthropic error type and message."""

    def __init__(self, status: int, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.error_type = error_type or _ERROR_TYPES.get(status, "api_error")


@dataclass
class _Segment:
    """One cacheable unit (tool, system block or message block) with its simulated tokens."""

    tokens: int
    material: Any
    cache_control: dict[str, Any] | None


@dataclass
class _Batch:
    id: str
    created_at: datetime
    results: list[dict[str, Any]]
    polls: int = 0
    ended_at: datetime | None = None


@dataclass
class _Failure:
    status: int
    retry_after: float | None
    message: str


@dataclass
class _CachePlan:
    read: int = 0
    write_5m: int = 0
    write_1h: int = 0
    stores: list[tuple[str, float]] = field(default_factory=list)  # (prefix key, ttl seconds)


def _now_iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def _words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]


def _block_tokens(block: Any) -> int:
    if isinstance(block, dict) and block.get("type") == "text":
        return simulated_token_count(str(block.get("text", "")))
    stripped = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
    return simulated_token_count(json.dumps(stripped, sort_keys=True, separators=(",", ":")))


def _strip_cc(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


class AnthropicSimulator(SimulatorServer):
    """The Anthropic Messages API on 127.0.0.1 (built on the shared :class:`SimulatorServer`)."""

    def __init__(
        self, *, latency_seconds: float = 0.0, cache_ttl_seconds: float = 300.0, batch_polls_until_done: int = 1
    ) -> None:
        super().__init__(latency_seconds=latency_seconds)
        self.requests: list[RecordedRequest] = []  # type: ignore[assignment]
        self.cache_ttl_seconds = cache_ttl_seconds
        self.batch_polls_until_done = batch_polls_until_done
        self.batch_creations = 0  # successful POST /v1/messages/batches since the last reset()
        self.batch_polls = 0  # GET /v1/messages/batches/{id} since the last reset()
        self._api_failures: deque[_Failure] = deque()
        self._omit: set[int] | None = None
        self._responder: Callable[[str], str] | None = None
        self._cache: dict[str, list[float]] = {}  # prefix key -> [expires_at, ttl]
        self._batches: dict[str, _Batch] = {}
        self._state_lock = threading.Lock()
        self._stalls: deque[float] = deque()
        self.in_flight = 0  # POST /v1/messages being answered right now
        self.peak_in_flight = 0  # the most at once since the last reset()
        self._window: tuple[int, float] | None = None  # (requests per window, window seconds)
        self._window_start = 0.0
        self._window_used = 0

    # ------------------------------------------------------------------ controls
    def fail_next(
        self, status: int, count: int = 1, retry_after: float | None = None, message: str | None = None
    ) -> None:
        """Answer the next ``count`` POST /v1/messages or batch-create requests with an error."""
        text = message or _DEFAULT_MESSAGES.get(status, f"Simulated error {status}.")
        with self._state_lock:
            self._api_failures.extend(_Failure(status, retry_after, text) for _ in range(count))

    def stall_next(self, count: int, seconds: float) -> None:
        """Hold the next ``count`` POST /v1/messages for ``seconds`` before answering: a request whose answer does not
        come (lost on the way, a stuck upstream), as a client with no timeout of its own would wait on it."""
        with self._state_lock:
            self._stalls.extend([seconds] * count)

    def limit_requests(self, per_window: int | None, window_seconds: float = 60.0) -> None:
        """Enforce a requests limit like an organisation's rate limit (a fixed window, SIMULATED): every
        POST /v1/messages answer carries ``anthropic-ratelimit-requests-{limit,remaining,reset}`` (reset as RFC 3339),
        and a request over the limit gets 429 ``rate_limit_error`` with ``retry-after``. ``None`` turns it off."""
        with self._state_lock:
            self._window = (per_window, window_seconds) if per_window else None
            self._window_start, self._window_used = time.monotonic(), 0

    def _rate_limit_headers(self) -> tuple[dict[str, str], float | None]:
        """(headers, retry-after if this request is over the limit) for one POST /v1/messages."""
        with self._state_lock:
            if self._window is None:
                return {}, None
            limit, seconds = self._window
            now = time.monotonic()
            if now - self._window_start >= seconds:
                self._window_start, self._window_used = now - (now - self._window_start) % seconds, 0
            left_s = self._window_start + seconds - now
            over = self._window_used >= limit
            if not over:
                self._window_used += 1
            reset = datetime.now(UTC) + timedelta(seconds=left_s)
            headers = {
                "anthropic-ratelimit-requests-limit": str(limit),
                "anthropic-ratelimit-requests-remaining": str(max(0, limit - self._window_used)),
                "anthropic-ratelimit-requests-reset": reset.isoformat().replace("+00:00", "Z"),
            }
            return headers, (left_s if over else None)

    def omit_contexts_for(self, chunk_indices: set[int]) -> None:
        """Leave these chunk indices out of the next tool_use answer (one response only)."""
        with self._state_lock:
            self._omit = set(chunk_indices)

    def reply_with(self, responder: Callable[[str], str] | None) -> None:
        """Answer plain (non-tool) requests with ``responder(last user text)`` instead of the default sentence:
        tests use it to script a reranker's indices or a judge's verdict."""
        with self._state_lock:
            self._responder = responder

    def reset(self) -> None:
        """Clear recorded requests, pending failures/omissions, the prompt cache and the batch counters.

        Batches themselves are kept, so a "resumed" run can still poll a batch made before the reset.
        """
        super().reset()
        with self._state_lock:
            self._api_failures.clear()
            self._stalls.clear()
            self._omit = None
            self._responder = None
            self._cache.clear()
            self.batch_creations = self.batch_polls = 0
            self.peak_in_flight = 0

    def error_body(self, status: int, message: str) -> Any:
        return self._error_payload(ApiError(status, message))

    # ------------------------------------------------------------------ dispatch
    def _dispatch(self, request: _http.RecordedRequest, raw_ok: bool) -> Reply:
        rec = RecordedRequest(request.method, request.path, request.headers, request.json, received_at=time.monotonic())
        with self._lock:
            self.requests.append(rec)
        counted = rec.method == "POST" and rec.path.split("?", 1)[0].rstrip("/") == "/v1/messages"
        if counted:
            with self._state_lock:
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            reply = self._route(rec, raw_ok)
        except ApiError as exc:
            reply = self._error_reply(exc)
        except Exception as exc:  # a simulator bug must still produce an HTTP answer
            reply = self._error_reply(ApiError(500, f"Simulator error: {exc!r}"))
        finally:
            if counted:
                with self._state_lock:
                    self.in_flight -= 1
        reply.headers.setdefault("request-id", _new_id("req_"))
        rec.status, rec.responded_at = reply.status, time.monotonic()
        if reply.status >= 400 and isinstance(reply.body, dict):
            rec.error_type = reply.body.get("error", {}).get("type")
        return reply

    def _route(self, rec: RecordedRequest, raw_ok: bool) -> Reply:
        path = rec.path.split("?", 1)[0].rstrip("/")
        key = rec.headers.get("x-api-key", "").strip()
        bearer = rec.headers.get("authorization", "").strip()
        if not key and not (bearer.lower().startswith("bearer ") and bearer[7:].strip()):
            raise ApiError(401, "x-api-key header is required")
        if not rec.headers.get("anthropic-version"):
            raise ApiError(400, "anthropic-version: header is required")
        if rec.method == "POST" and path == "/v1/messages":
            with self._state_lock:
                stall = self._stalls.popleft() if self._stalls else 0.0
            time.sleep(stall)
        if rec.method == "POST" and path in ("/v1/messages", "/v1/messages/batches"):
            with self._state_lock:
                failure = self._api_failures.popleft() if self._api_failures else None
            if failure is not None:
                wait = failure.retry_after
                headers = {} if wait is None else {"retry-after": _http._format_seconds(wait)}
                return self._error_reply(ApiError(failure.status, failure.message), headers)
        if rec.method == "POST" and (not raw_ok or not isinstance(rec.json, dict)):
            raise ApiError(400, "The request body is not valid JSON (an object is required).")
        if rec.method == "POST" and path == "/v1/messages":
            limit_headers, over_for = self._rate_limit_headers()
            if over_for is not None:
                message = "This request would exceed your organization's rate limit of requests per minute (simulated)."
                retry = {"retry-after": _http._format_seconds(round(max(over_for, 0.01), 3))}
                return self._error_reply(ApiError(429, message), {**limit_headers, **retry})
            message = self._process(rec.json, service_tier="standard", record=rec)
            return Reply(200, message, limit_headers)
        if rec.method == "POST" and path == "/v1/messages/count_tokens":
            segments = self._validate(rec.json, count_tokens=True)
            rec.usage = {"input_tokens": sum(s.tokens for s in segments)}
            return Reply(200, dict(rec.usage))
        if rec.method == "POST" and path == "/v1/messages/batches":
            return Reply(200, self._create_batch(rec.json))
        match = _BATCH_PATH.match(path)
        if rec.method == "GET" and match:
            return self._batch_get(match.group(1), results=bool(match.group(2)))
        raise ApiError(404, f"Not found: {rec.method} {path}")

    def _error_payload(self, exc: ApiError) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": exc.error_type, "message": exc.message},
            "request_id": _new_id("req_"),
        }

    def _error_reply(self, exc: ApiError, headers: dict[str, str] | None = None) -> Reply:
        body = self._error_payload(exc)
        return Reply(exc.status, body, {"request-id": body["request_id"], **(headers or {})})

    # ------------------------------------------------------------------ validation
    def _validate(self, body: dict[str, Any], *, count_tokens: bool = False) -> list[_Segment]:
        """Check ``body`` like the API and return its cacheable segments (raises :class:`ApiError`)."""
        for name in _REMOVED_SAMPLING:
            if name in body:
                raise ApiError(400, f"{name}: this parameter is not supported by this model/API version")
        extra = sorted(set(body) - _BODY_FIELDS - ({"max_tokens"} if count_tokens else set()))
        if extra:
            raise ApiError(400, f"{extra[0]}: Extra inputs are not permitted")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise ApiError(400, "model: Field required (a non-empty string)")
        if not model.startswith("claude-"):
            raise ApiError(404, f"model: {model}")
        if not count_tokens:
            mt = body.get("max_tokens")
            if not isinstance(mt, int) or isinstance(mt, bool) or mt < 1:
                raise ApiError(400, "max_tokens: Field required (an integer >= 1)")
        if body.get("stream"):
            raise ApiError(400, "stream: streaming is not implemented by the simulator")
        segments: list[_Segment] = []
        tools = body.get("tools", [])
        if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
        ):
            raise ApiError(400, "tools: Input should be a list of tool objects with a name")
        segments += [_Segment(_block_tokens(t), _strip_cc(t), t.get("cache_control")) for t in tools]
        choice = body.get("tool_choice")
        if choice is not None:
            if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
                raise ApiError(400, "tool_choice: Input tag should be 'auto', 'any', 'tool' or 'none'")
            if choice["type"] == "tool" and choice.get("name") not in {t["name"] for t in tools}:
                raise ApiError(400, f"tool_choice.name: tool '{choice.get('name')}' not found in tools")
        system = body.get("system")
        if isinstance(system, str):
            segments.append(_Segment(simulated_token_count(system), system, None))
        elif isinstance(system, list):
            for i, block in enumerate(system):
                if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                    raise ApiError(400, f"system.{i}: Input should be a text block")
                segments.append(_Segment(_block_tokens(block), _strip_cc(block), block.get("cache_control")))
        elif system is not None:
            raise ApiError(400, "system: Input should be a string or a list of text blocks")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages: Field required (a non-empty list)")
        for i, msg in enumerate(messages):
            if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
                raise ApiError(400, f"messages.{i}.role: Input should be 'user' or 'assistant'")
            content = msg.get("content")
            final_assistant = i == len(messages) - 1 and msg["role"] == "assistant"
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            if not isinstance(content, list) or not all(isinstance(b, dict) and "type" in b for b in content):
                raise ApiError(400, f"messages.{i}.content: Input should be a string or a list of content blocks")
            if not content and not final_assistant:
                raise ApiError(
                    400,
                    f"messages.{i}: all messages must have non-empty content "
                    "except for the optional final assistant message",
                )
            for j, block in enumerate(content):
                if block["type"] == "text" and (not isinstance(block.get("text"), str) or not block["text"]):
                    raise ApiError(400, f"messages.{i}.content.{j}: text content blocks must be non-empty")
                tokens = _block_tokens(block) + (MESSAGE_OVERHEAD_TOKENS if j == 0 else 0)
                segments.append(_Segment(tokens, [msg["role"], _strip_cc(block)], block.get("cache_control")))
        stops = body.get("stop_sequences", [])
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise ApiError(400, "stop_sequences: Input should be a list of strings")
        if isinstance(body.get("cache_control"), dict) and segments and segments[-1].cache_control is None:
            segments[-1].cache_control = body["cache_control"]
        marks = [s.cache_control for s in segments if s.cache_control is not None]
        if len(marks) > MAX_CACHE_BREAKPOINTS:
            raise ApiError(
                400,
                f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marks)}.",
            )
        seen_5m = False
        for cc in marks:
            if not isinstance(cc, dict) or cc.get("type") != "ephemeral" or cc.get("ttl", "5m") not in ("5m", "1h"):
                raise ApiError(400, "cache_control: expected {'type': 'ephemeral', 'ttl'?: '5m' | '1h'}")
            if cc.get("ttl") == "1h" and seen_5m:
                raise ApiError(400, "cache_control: a ttl='1h' cache_control block must not come after a ttl='5m' one")
            seen_5m = seen_5m or cc.get("ttl", "5m") == "5m"
        return segments

    # ------------------------------------------------------------------ caching
    def _cache_lookup(self, model: str, segments: list[_Segment]) -> _CachePlan:
        """Find the longest live cached breakpoint prefix (refreshing it) and plan the writes."""
        plan = _CachePlan()
        running = hashlib.sha256(model.encode())
        cum, points = 0, []  # (segment index, cumulative tokens, prefix key)
        for i, seg in enumerate(segments):
            running.update(json.dumps(seg.material, sort_keys=True, separators=(",", ":")).encode())
            cum += seg.tokens
            if seg.cache_control is not None:
                points.append((i, cum, running.copy().hexdigest()))
        minimum = min_cacheable_tokens(model)
        if not points or points[-1][1] < minimum:
            return plan
        now, hit = time.monotonic(), -1
        with self._state_lock:
            for k in range(len(points) - 1, -1, -1):
                entry = self._cache.get(points[k][2])
                if entry is not None and entry[0] > now:
                    entry[0] = now + entry[1]  # a read refreshes the TTL
                    plan.read, hit = points[k][1], k
                    break
        previous = plan.read
        for i, cumulative, key in points[hit + 1 :]:
            one_hour = segments[i].cache_control.get("ttl") == "1h"  # type: ignore[union-attr]
            ttl = ONE_HOUR_SECONDS if one_hour else self.cache_ttl_seconds
            if one_hour:
                plan.write_1h += cumulative - previous
            else:
                plan.write_5m += cumulative - previous
            if cumulative >= minimum:
                plan.stores.append((key, ttl))
            previous = cumulative
        return plan

    def _cache_commit(self, plan: _CachePlan) -> None:
        now = time.monotonic()
        with self._state_lock:
            for key, ttl in plan.stores:
                self._cache[key] = [now + ttl, ttl]

    # ------------------------------------------------------------------ answering
    def _process(self, body: dict[str, Any], *, service_tier: str, record: RecordedRequest | None) -> dict[str, Any]:
        """Validate, apply caching, wait the latency and build the message object."""
        segments = self._validate(body)
        plan = self._cache_lookup(body["model"], segments)
        if self.latency_seconds > 0 and record is not None:
            time.sleep(self.latency_seconds)
        self._cache_commit(plan)
        content, stop_reason, stop_sequence = self._answer(body)
        out_text = "".join(b["text"] if b["type"] == "text" else json.dumps(b["input"]) for b in content)
        total = sum(s.tokens for s in segments)
        written = plan.write_5m + plan.write_1h
        usage = {
            "input_tokens": total - written - plan.read,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": plan.read,
            "cache_creation": {"ephemeral_5m_input_tokens": plan.write_5m, "ephemeral_1h_input_tokens": plan.write_1h},
            "output_tokens": simulated_token_count(out_text),
            "service_tier": service_tier,
        }
        if record is not None:
            record.usage = usage
        return {
            "id": _new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": copy.deepcopy(usage),
        }

    def _answer(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str, str | None]:
        messages = body["messages"]
        system = body.get("system") or []
        all_text = "\n".join(_texts(system) + [t for m in messages for t in _texts(m["content"])])
        doc_match = _DOC.search(all_text)
        doc = doc_match.group(1) if doc_match else ""
        user_texts = ["\n".join(_texts(m["content"])) for m in messages if m["role"] == "user"]
        choice = body.get("tool_choice") or {}
        tools = body.get("tools") or []
        tool_name = (
            choice.get("name")
            if choice.get("type") == "tool"
            else (tools[0]["name"] if choice.get("type") == "any" and len(tools) == 1 else None)
        )
        if tool_name:
            with self._state_lock:
                omit, self._omit = self._omit or set(), None
            last = user_texts[-1] if user_texts else ""
            contexts = [
                {"chunk_index": int(i), "context": _sentence(doc, chunk)}
                for i, chunk in _INDEXED_CHUNK.findall(last)
                if int(i) not in omit
            ]
            stop_reason = "tool_use"
            while contexts and simulated_token_count(json.dumps({"contexts": contexts})) > body["max_tokens"]:
                contexts.pop()
                stop_reason = "max_tokens"
            block = {"type": "tool_use", "id": _new_id("toolu_"), "name": tool_name, "input": {"contexts": contexts}}
            return [block], stop_reason, None
        chunk = next((m[-1] for m in (_CHUNK.findall(t) for t in reversed(user_texts)) if m), None)
        text = "Simulated answer." if chunk is None else _sentence(doc, chunk)
        with self._state_lock:
            responder = self._responder
        if responder is not None:
            text = responder(user_texts[-1] if user_texts else "")
        for stop in body.get("stop_sequences", []):
            if stop and stop in text:
                return [{"type": "text", "text": text[: text.index(stop)]}], "stop_sequence", stop
        limit = body["max_tokens"] * 4
        if len(text.encode("utf-8")) > limit:
            text = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
            return [{"type": "text", "text": text}], "max_tokens", None
        return [{"type": "text", "text": text}], "end_turn", None

    # ------------------------------------------------------------------ batches
    def _create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise ApiError(400, "requests: Field required (a non-empty list)")
        seen: set[str] = set()
        for i, item in enumerate(requests):
            cid = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(cid, str) or not _CUSTOM_ID.match(cid):
                raise ApiError(400, f"requests.{i}.custom_id: must be 1-64 characters of [A-Za-z0-9_-]")
            if cid in seen:
                raise ApiError(400, f"requests.{i}.custom_id: duplicate custom_id '{cid}'")
            if not isinstance(item.get("params"), dict):
                raise ApiError(400, f"requests.{i}.params: Field required")
            seen.add(cid)
        results = []
        for item in requests:
            try:
                message = self._process(item["params"], service_tier="batch", record=None)
                result = {"type": "succeeded", "message": message}
            except ApiError as exc:
                result = {"type": "errored", "error": self._error_payload(exc)}
            results.append({"custom_id": item["custom_id"], "result": result})
        batch = _Batch(_new_id("msgbatch_"), datetime.now(UTC), results)
        with self._state_lock:
            self._batches[batch.id] = batch
            self.batch_creations += 1
        return self._batch_object(batch)

    def _batch_object(self, batch: _Batch) -> dict[str, Any]:
        ended = batch.ended_at is not None
        kinds = [r["result"]["type"] for r in batch.results]
        counts = {
            "processing": 0 if ended else len(kinds),
            "succeeded": kinds.count("succeeded") if ended else 0,
            "errored": kinds.count("errored") if ended else 0,
            "canceled": 0,
            "expired": 0,
        }
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": _now_iso(batch.created_at),
            "expires_at": _now_iso(batch.created_at + timedelta(hours=24)),
            "ended_at": _now_iso(batch.ended_at) if batch.ended_at else None,
            "cancel_initiated_at": None,
            "archived_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    def _batch_get(self, batch_id: str, *, results: bool) -> Reply:
        with self._state_lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                raise ApiError(404, f"message_batch_id: batch '{batch_id}' not found")
            if not results:
                self.batch_polls += 1
                batch.polls += 1
                if batch.ended_at is None and batch.polls >= self.batch_polls_until_done:
                    batch.ended_at = datetime.now(UTC)
        if not results:
            return Reply(200, self._batch_object(batch))
        if batch.ended_at is None:
            raise ApiError(404, f"batch '{batch_id}' has not finished processing; no results yet")
        lines = "".join(json.dumps(r) + "\n" for r in batch.results).encode("utf-8")
        return Reply(200, lines, {"content-type": "application/binary"})


def _sentence(doc: str, chunk: str) -> str:
    """The deterministic "context" for a chunk."""
    if not doc.strip():
        return f"This chunk covers '{_words(chunk, 12)}'."
    return f"This chunk is from a document beginning '{_words(doc, 8)}' and covers '{_words(chunk, 12)}'."

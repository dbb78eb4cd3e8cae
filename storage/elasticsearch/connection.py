"""Connecting to Elasticsearch with the official 9.x client, pinned to ``compatible-with=8`` at the HTTP node (so
8.x servers from 8.4 and 9.x servers both accept it; see docs/decisions.md), and its errors as one redacted line.

Secrets (API key, password, a password in the URL) are registered with ``ctxrag.storage.secrets.remember``; every message
this package writes goes through ``ctxrag.storage.secrets.redact``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from elastic_transport import HttpHeaders, TransportError, Urllib3HttpNode
from elastic_transport.client_utils import DEFAULT, DefaultType
from elasticsearch import ApiError, Elasticsearch

from ctxrag.storage.errors import UserError
from ctxrag.storage.secrets import redact, remember

ENV_URL = "ELASTICSEARCH_URL"
ENV_API_KEY = "ELASTICSEARCH_API_KEY"
ENV_USERNAME = "ELASTICSEARCH_USERNAME"
ENV_PASSWORD = "ELASTICSEARCH_PASSWORD"
ENV_CA_CERTS = "ELASTICSEARCH_CA_CERTS"

COMPATIBLE_WITH = 8  # see the module docstring


class EsError(UserError, RuntimeError):
    """An Elasticsearch backend operation that failed; the message is redacted."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class EsConfigError(UserError, ValueError):
    """The connection settings are missing or wrong (not worth retrying)."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


def _compat_node_class(major: int) -> type[Urllib3HttpNode]:
    """A urllib3 node that sends ``compatible-with=<major>`` whatever the client's own major version is."""
    pattern = re.compile(r"compatible-with=\d+")

    class CompatNode(Urllib3HttpNode):
        def perform_request(
            self,
            method: str,
            target: str,
            body: bytes | None = None,
            headers: HttpHeaders | None = None,
            request_timeout: DefaultType | float | None = DEFAULT,
        ) -> Any:
            if headers is not None:
                headers = headers.copy()
                for name in ("accept", "content-type"):
                    if name in headers:
                        headers[name] = pattern.sub(f"compatible-with={major}", headers[name])
            return super().perform_request(method, target, body=body, headers=headers, request_timeout=request_timeout)

    CompatNode.__name__ = CompatNode.__qualname__ = f"CompatibleWith{major}Node"
    return CompatNode


def connect(
    url: str | None = None, *, compatible_with: int | None = COMPATIBLE_WITH, request_timeout: float = 30.0
) -> Elasticsearch:
    """A client for ``url`` (else ``$ELASTICSEARCH_URL``), authenticated from the environment.

    ``ELASTICSEARCH_API_KEY`` (encoded, or ``id:key``) wins over ``ELASTICSEARCH_USERNAME``/``_PASSWORD``;
    ``ELASTICSEARCH_CA_CERTS`` names a CA bundle for TLS. No request is sent until the client is used.
    """
    url = (url or os.environ.get(ENV_URL, "")).strip()
    if not url:
        raise EsConfigError(f"no Elasticsearch URL: set {ENV_URL} (e.g. https://localhost:9200) or pass one")
    parts = urlsplit(url)
    if parts.password:
        remember(parts.password)
        remember(unquote(parts.password))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EsConfigError(f"{ENV_URL} must be an http(s) URL with a host, got {url!r}")
    options: dict[str, Any] = {"request_timeout": request_timeout, "max_retries": 3, "retry_on_timeout": True}
    api_key = os.environ.get(ENV_API_KEY, "").strip()
    username = os.environ.get(ENV_USERNAME, "").strip()
    password = os.environ.get(ENV_PASSWORD, "")
    if api_key:
        remember(api_key)
        if ":" in api_key:
            key_id, _, key = api_key.partition(":")
            remember(key)
            options["api_key"] = (key_id, key)
        else:
            options["api_key"] = api_key
    elif username or password:
        remember(password)
        if not (username and password):
            raise EsConfigError(f"set both {ENV_USERNAME} and {ENV_PASSWORD} (or {ENV_API_KEY} instead)")
        options["basic_auth"] = (username, password)
    ca_certs = os.environ.get(ENV_CA_CERTS, "").strip()
    if ca_certs:
        if not os.path.isfile(ca_certs):
            raise EsConfigError(f"{ENV_CA_CERTS} names {ca_certs!r}, which is not a file")
        options["ca_certs"] = ca_certs
    if compatible_with is not None:
        options["node_class"] = _compat_node_class(compatible_with)
    return Elasticsearch(url, **options)


def _reason(error: Any) -> str:
    """A one-line reason from a bulk item's or an API error's ``error`` value."""
    if isinstance(error, Mapping):
        text = f"{error.get('type', 'error')}: {error.get('reason', '')}".strip()
        cause = error.get("caused_by")
        if (
            isinstance(cause, Mapping)
            and cause.get("reason")
            and str(cause["reason"]) not in str(error.get("reason", ""))
        ):
            text += f" (caused by {cause.get('type', 'error')}: {cause['reason']})"
        return redact(text)
    return redact(str(error))


def _api_reason(error: ApiError) -> str:
    body = error.body if isinstance(error.body, Mapping) else {}
    inner = body.get("error")
    return _reason(inner) if inner else redact(str(error.message or error))


def describe_error(error: ApiError | TransportError) -> str:
    """One redacted line for a failed Elasticsearch request (an API error, or the cluster unreachable)."""
    if isinstance(error, ApiError):
        return f"Elasticsearch answered {error.meta.status}: {_api_reason(error)}"
    return redact(f"Elasticsearch request failed: {' '.join(str(error).split())}")

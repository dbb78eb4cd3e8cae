"""What a service answers instead of an answer: one ``ServiceError`` whose ``kind`` says what class of problem it is
(``invalid_request``, ``unknown_index``, ``not_found``, ``method_not_allowed``, ``unauthorized``, ``too_large``,
``unavailable``, ``internal``) and whose message says what was wrong. The MCP door returns it as a tool error result,
the HTTP door as the JSON body ``{"error": {"kind", "message"}}`` with its status, the resident search as its answer
line. The request itself is the search contract's (``ctxrag.tasks.common.search_request``).
"""

from __future__ import annotations

from typing import Any

from ctxrag.storage.errors import InvalidInput, UnknownIndexError, UserError
from ctxrag.tasks.common.search_request import SearchRequest

STATUS = {
    "invalid_request": 400,
    "unauthorized": 401,
    "unknown_index": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "too_large": 413,
    "internal": 500,
    "unavailable": 503,
}


class ServiceError(Exception):
    """What a service answers instead of hits: ``kind`` (a key of ``STATUS``) and a message for the caller."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    @property
    def status(self) -> int:
        """The HTTP status of this error."""
        return STATUS[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"kind": self.kind, "message": self.message}}

    @classmethod
    def of(cls, error: UserError) -> ServiceError:
        """A user error from the search path as a service error (a bad value, an unknown index, anything else)."""
        if isinstance(error, InvalidInput):
            return cls("invalid_request", str(error))
        if isinstance(error, UnknownIndexError) and type(error) is UnknownIndexError:
            return cls("unknown_index", str(error))
        return cls("unavailable", str(error))  # a corrupt or busy index, a missing key: the caller cannot fix it


def parsed(
    given: Any, defaults: dict[str, Any] | None = None, contract: type[SearchRequest] = SearchRequest
) -> SearchRequest:
    """The search request ``given`` names (a JSON value), checked by the contract; a bad one is a ``ServiceError``."""
    try:
        return contract.from_dict(given, defaults)
    except InvalidInput as error:
        raise ServiceError("invalid_request", str(error)) from None

"""The base class of errors a user can act on, at the bottom of the import graph (storage/ and tasks/ both use it).

A ``UserError`` is bad input, an unknown name, a missing key, a failed API call, a refused or busy build, a corrupt
file named in the message: the CLI shows its message as one line (``error: ...``, exit code 2). Any other
exception is a bug in ctxrag and keeps its traceback, so raise a subclass of this only for what the user can fix.
Subclasses usually also derive from the builtin they replace (``ValueError``, ``RuntimeError``, ``LookupError``) so
that existing ``except`` clauses keep working.
"""

from __future__ import annotations


class UserError(Exception):
    """An error whose message is the whole story for the user (no traceback needed)."""


class InvalidInput(UserError, ValueError):
    """A value the user gave (an option, a name, a setting) that ctxrag cannot use; the message says which."""


class BusyError(UserError, RuntimeError):
    """Another ctxrag process holds what this one needs (a build, gc); run again when it ends."""


class UnknownIndexError(UserError, LookupError):
    """A named index that does not exist or cannot be read."""


class CorruptIndexError(UnknownIndexError):
    """A file of an index (``live.json``, a manifest, the chunk table) cannot be read; the message names it."""


class IndexBusyError(BusyError):
    """Another run holds the index's build lock."""

"""The host program's process state, left as a public call found it.

ctxrag sets no environment variable, logging handler, warnings filter or signal handler of its own in a program that
imports it (the ``ctxrag`` command sets its process defaults for itself: ``ctxrag.cli.main``). The libraries a call
imports or runs do: Prefect configures the root logger when a flow runs, torch and scikit-learn set environment
variables and warnings filters when imported. ``as_found`` puts those four things back as they were when the call
began; within the call they stay as the libraries set them.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

Params = ParamSpec("Params")
Result = TypeVar("Result")

_SIGNALS = tuple(sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}))
_depth = threading.local()  # nested public calls (``search`` opens an ``Index``) restore once, at the outer one


@dataclass(frozen=True)
class HostState:
    """What a library call could change in its host's process, and ctxrag leaves as it found it."""

    environ: dict[str, str]
    root_handlers: list[logging.Handler]
    handler_filters: list[list[Any]]
    root_level: int
    root_filters: list[Any]
    root_disabled: bool
    warning_filters: list[Any]
    signal_handlers: dict[int, Any]

    @classmethod
    def now(cls) -> HostState:
        root = logging.getLogger()
        return cls(
            environ=dict(os.environ),
            root_handlers=list(root.handlers),
            handler_filters=[list(handler.filters) for handler in root.handlers],
            root_level=root.level,
            root_filters=list(root.filters),
            root_disabled=root.disabled,
            warning_filters=list(warnings.filters),
            signal_handlers=_signal_handlers(),
        )

    def restore(self) -> None:
        """Put the state back: the environment variables that changed, the root logger (its handlers' filters too),
        the warnings filters and, from the main thread, the signal handlers."""
        now = dict(os.environ)
        for name in now.keys() - self.environ.keys():
            del os.environ[name]
        for name, value in self.environ.items():
            if now.get(name) != value:
                os.environ[name] = value
        root = logging.getLogger()
        root.handlers[:] = self.root_handlers
        for handler, filters in zip(self.root_handlers, self.handler_filters):
            handler.filters[:] = filters
        root.setLevel(self.root_level)
        root.filters[:] = self.root_filters
        root.disabled = self.root_disabled
        if warnings.filters != self.warning_filters:
            kept: list[Any] = warnings.filters  # type: ignore[assignment]  # typeshed: a Sequence; it is the module's list
            kept[:] = self.warning_filters
            warnings._filters_mutated()  # type: ignore[attr-defined]  # the cache of "once"/"default" decisions
        if threading.current_thread() is threading.main_thread():
            for number, handler in self.signal_handlers.items():
                if signal.getsignal(number) is not handler and handler is not None:
                    signal.signal(number, handler)


def _signal_handlers() -> dict[int, Any]:
    return {number: signal.getsignal(number) for number in _SIGNALS}


@contextmanager
def as_found() -> Iterator[None]:
    """Within the block, anything goes; after it, the host's environment, root logger, warnings filters and signal
    handlers are as they were before it (however it ends). Nested blocks restore at the outermost."""
    depth = getattr(_depth, "value", 0)
    state = HostState.now() if depth == 0 else None
    _depth.value = depth + 1
    try:
        yield
    finally:
        _depth.value = depth
        if state is not None:
            state.restore()


def keeps_host_state(call: Callable[Params, Result]) -> Callable[Params, Result]:
    """``call`` run ``as_found``: a public API function or method."""

    @functools.wraps(call)
    def kept(*args: Params.args, **kwargs: Params.kwargs) -> Result:
        with as_found():
            return call(*args, **kwargs)

    return kept

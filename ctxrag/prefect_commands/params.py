"""``KEY=VALUE`` options of ``ctxrag trigger``: ``--param`` (run parameters) and ``--env`` (the run's environment)."""

from __future__ import annotations

import json
from typing import Any

from ctxrag.prefect_commands.errors import CommandError


def parse_params(pairs: list[str] | None) -> dict[str, Any]:
    """``k=v`` pairs -> parameters; a value that parses as JSON is JSON (``k=5`` -> 5), otherwise a string. A dotted
    key sets a field of an object parameter (``options.gate.evalset=q.jsonl``)."""
    parameters: dict[str, Any] = {}
    for pair in pairs or []:
        key, separator, raw = pair.partition("=")
        if not separator or not key.strip():
            raise CommandError(f"--param takes KEY=VALUE, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        *groups, leaf = key.strip().split(".")
        place = parameters
        for group in groups:
            place = place.setdefault(group, {})
        place[leaf] = value
    return parameters


def merged(given: dict[str, Any], deployed: dict[str, Any]) -> dict[str, Any]:
    """A run's parameters: the deployment's, with ``given`` set over them (object parameters field by field)."""
    result = dict(deployed)
    for key, value in given.items():
        result[key] = (
            merged(value, deployed[key]) if isinstance(value, dict) and isinstance(deployed.get(key), dict) else value
        )
    return result


def parse_env(pairs: list[str] | None) -> dict[str, str]:
    """``NAME=VALUE`` pairs -> environment variables (values stay strings)."""
    env: dict[str, str] = {}
    for pair in pairs or []:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise CommandError(f"--env takes NAME=VALUE, got {pair!r}")
        env[key.strip()] = value
    return env

"""What a benchmark report says of the machine it ran on. Public tools only: /proc/cpuinfo, os, platform."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name with its family and model numbers: a virtual machine may name only "Intel Xeon Processor"."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "?"
    fields: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            break  # the first processor's block is enough
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or "?"
    if "cpu family" in fields and "model" in fields:
        return f"{name}, family {fields['cpu family']} model {fields['model']}"
    return name


def machine_meta() -> dict:
    """Cores, CPU, Python and the day: the opening facts of a report."""
    return {"cpus": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}

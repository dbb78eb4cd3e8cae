"""Which precision the local embedder runs in: bf16 autocast where it is measurably faster here, else fp32.

Two conditions for bf16 under ``auto``. The CPU computes bf16 natively (``cpu_has_native_bf16``: AVX512-BF16 or
AMX-BF16, and a oneDNN that accepts bf16). And a matrix product shaped like the model's feed-forward layer runs at
least ``BF16_MIN_SPEEDUP`` times as fast in bf16 as in fp32 (``measured_bf16_speedup``, about 0.2 s). The flag alone is not enough: on an AMD EPYC with AVX512-BF16 bf16 encoded 2.4x as fast as fp32, but on an
Intel Xeon reporting AVX512-BF16 with AMX hidden by its virtual machine, bf16 ran 0.75x as fast (docs/decisions.md).
``CTXRAG_EMBED_PRECISION=auto|bf16|fp32`` overrides the choice.

The ``auto`` decision is made once per machine (``machine_signature``: CPU model and bf16 flags, torch,
transformers and sentence-transformers versions) and kept in ``cache_dir()/embed-precision.json``, so every process
and Dask worker of a machine embeds in the same precision. An index keeps the precision it was built in
(``precision_for_index``): vectors of the two never mix in one index by chance.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import time
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from ctxrag.storage.environment import cache_dir
from ctxrag.storage.errors import InvalidInput
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec
from ctxrag.tasks.common.providers import Provider

PRECISION_ENV = "CTXRAG_EMBED_PRECISION"
PRECISIONS = ("auto", "bf16", "fp32")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 instructions that compute bf16 (cpuinfo and /proc/cpuinfo names)
BF16_MIN_SPEEDUP = 1.2  # bf16 changes vectors (within 1e-4 cosine): worth it only when clearly faster
CALIBRATION_SHAPE = (2048, 384, 1536)  # tokens, MiniLM's hidden size, its feed-forward size: one batch's layer
CALIBRATION_REPEATS = 5
DECISIONS_FILE = "embed-precision.json"  # in cache_dir(): the auto decision per machine signature
SIGNATURE_PACKAGES = ("torch", "transformers", "sentence-transformers")  # what runs the model (queries: ONNX, fp32)


def choose_precision(requested: str | None = None) -> tuple[str, str]:
    """("bf16" or "fp32", why): ``requested``, else ``CTXRAG_EMBED_PRECISION``, else "auto" (bf16 where faster)."""
    value = (requested if requested is not None else os.environ.get(PRECISION_ENV, "")).strip().lower() or "auto"
    if value not in PRECISIONS:
        raise InvalidInput(f"{PRECISION_ENV}={value!r}: choose one of {', '.join(PRECISIONS)}")
    if value == "fp32":
        return "fp32", f"{PRECISION_ENV}=fp32" if requested is None else "asked for fp32"
    if value == "bf16":
        why = f"{PRECISION_ENV}=bf16" if requested is None else "asked for bf16"
        return "bf16", why if cpu_has_native_bf16() else f"{why}; this CPU has no native bf16, so it is likely slower than fp32"
    return machine_precision()


def precision_for_index(recorded: str | None) -> tuple[str, str]:
    """("bf16" or "fp32", why) for an index whose live version was built in ``recorded`` (None: new, or built before
    ctxrag recorded it). An index keeps its precision, so a re-index reuses its vectors and never mixes the two;
    ``CTXRAG_EMBED_PRECISION=bf16|fp32`` changes it, and every chunk is embedded again (the precision is part of a
    bf16 vector's key)."""
    forced = os.environ.get(PRECISION_ENV, "").strip().lower() in {"bf16", "fp32"}
    if recorded in {"bf16", "fp32"} and not forced:
        return recorded, f"the index was built in {recorded} and keeps it ({PRECISION_ENV}=bf16|fp32 changes it)"
    chosen, why = choose_precision()
    if recorded in {"bf16", "fp32"} and recorded != chosen:
        why += f"; the index was built in {recorded}, so every chunk is embedded again in {chosen}"
    return chosen, why


def with_index_precision(spec: EmbedderSpec, live: dict[str, Any] | None) -> tuple[EmbedderSpec, str]:
    """``spec`` with the precision index vectors are made in (``precision_for_index`` of the ``live`` manifest's),
    and why; a Voyage spec as it is ("")."""
    if spec.provider != Provider.LOCAL:
        return spec, ""
    recorded = ((live or {}).get("config") or {}).get("embedder", {}).get("precision")
    chosen, why = precision_for_index(recorded)
    return dataclasses.replace(spec, precision=chosen), why


def machine_precision() -> tuple[str, str]:
    """The ``auto`` choice, decided once per machine signature and kept in ``cache_dir()``; a decision whose timing
    failed is not kept (the next process tries again)."""
    path = cache_dir() / DECISIONS_FILE
    key = json.dumps(machine_signature(), sort_keys=True)
    decisions = _read_decisions(path)
    if key in decisions:
        kept = decisions[key]
        return kept["precision"], f"{kept['why']} (decided once for this machine on {kept['decided']}, kept in {path})"
    chosen, why, timed = _decide_auto()
    if timed:
        decisions[key] = {"precision": chosen, "why": why, "decided": time.strftime("%Y-%m-%d")}
        _write_decisions(path, decisions)
    return chosen, why


def machine_signature() -> dict[str, str]:
    """What the auto decision depends on, read without importing torch: the CPU model, its bf16 flags (a virtual
    machine may hide AMX on the same model) and the versions of the libraries that run the model."""
    flags = ",".join(sorted(_proc_cpu_flags() & set(NATIVE_BF16_FLAGS)))
    signature = {"cpu": _cpu_model(), "machine": platform.machine(), "bf16_flags": flags}
    for package in SIGNATURE_PACKAGES:
        try:
            signature[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            signature[package] = "absent"
    return signature


def _decide_auto() -> tuple[str, str, bool]:
    """(precision, why, whether the decision is sound to keep): bf16 where native and measurably faster."""
    if not cpu_has_native_bf16():
        return "fp32", "auto: the CPU has no native bf16 (AVX512-BF16 or AMX-BF16)", True
    try:
        speedup = measured_bf16_speedup()
    except Exception as error:  # noqa: BLE001 - a failed timing must not stop indexing: fp32 always works
        return "fp32", f"auto: the CPU has native bf16, but timing it failed ({type(error).__name__}), so fp32", False
    if speedup >= BF16_MIN_SPEEDUP:
        return "bf16", f"auto: the CPU has native bf16 and ran it {speedup:.2f}x as fast as fp32", True
    return "fp32", (
        f"auto: the CPU has native bf16 but ran it only {speedup:.2f}x as fast as fp32 (bf16 needs {BF16_MIN_SPEEDUP}x)"
    ), True


def _read_decisions(path: Path) -> dict[str, dict[str, str]]:
    try:
        decisions = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet, or unreadable: decide again
        return {}
    return decisions if isinstance(decisions, dict) else {}


def _write_decisions(path: Path, decisions: dict[str, dict[str, str]]) -> None:
    """Written whole and renamed into place; a cache that cannot be written only means deciding again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(decisions, indent=1, sort_keys=True))
        temporary.replace(path)
    except OSError:
        pass


@lru_cache(maxsize=1)
def measured_bf16_speedup() -> float:
    """fp32 seconds / bf16-autocast seconds of one ``CALIBRATION_SHAPE`` linear layer on torch's threads: the best of
    ``CALIBRATION_REPEATS`` runs each, the two interleaved after a warm-up. Above 1: bf16 is faster here."""
    import torch

    tokens, hidden, inner = CALIBRATION_SHAPE
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(tokens, hidden, generator=generator)
    weight, bias = torch.randn(inner, hidden, generator=generator), torch.randn(inner, generator=generator)

    def seconds(precision: str) -> float:
        started = time.perf_counter()
        with torch.inference_mode(), autocast_to(precision):
            torch.nn.functional.linear(inputs, weight, bias)
        return time.perf_counter() - started

    seconds("fp32"), seconds("bf16")  # oneDNN builds its kernels on first use
    runs = [(seconds("fp32"), seconds("bf16")) for _ in range(CALIBRATION_REPEATS)]
    return min(fp32 for fp32, _ in runs) / min(bf16 for _, bf16 in runs)


def autocast_to(precision: str) -> contextlib.AbstractContextManager[object]:
    """torch's bf16 autocast on the CPU for "bf16"; nothing for "fp32"."""
    if precision != "bf16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)


def cpu_has_native_bf16() -> bool:
    """Whether PyTorch's oneDNN can run bf16 matrix products here on instructions made for them.

    Two checks. oneDNN must be built in (``torch.backends.mkldnn.is_available()``) and accept bf16
    (``torch.ops.mkldnn._is_mkldnn_bf16_supported()``, when this torch has it). That alone is not enough: it is also
    true on AVX-512 CPUs without bf16 instructions (Skylake, Cascade Lake, Ice Lake), where bf16 is emulated and slower
    than fp32. So the CPU must also report AVX512-BF16 or AMX-BF16: ``torch.cpu.get_capabilities()`` (cpuinfo, any
    OS), else the flags in /proc/cpuinfo (Linux). ARM CPUs with bf16 are left out: not measured (force it with
    ``CTXRAG_EMBED_PRECISION=bf16``). Any failure to tell means no.
    """
    return _onednn_bf16() and bool(_cpu_flags() & set(NATIVE_BF16_FLAGS))


def _onednn_bf16() -> bool:
    try:
        import torch

        if not torch.backends.mkldnn.is_available():
            return False
        check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        return check is None or bool(check())
    except Exception:  # noqa: BLE001 - no usable torch / oneDNN: fp32
        return False


def _cpu_flags() -> set[str]:
    """The CPU's bf16-relevant features that are present, from torch's cpuinfo, else from /proc/cpuinfo."""
    try:
        import torch

        capabilities = torch.cpu.get_capabilities()
        return {name for name in NATIVE_BF16_FLAGS if capabilities.get(name)}
    except Exception:  # noqa: BLE001 - torch older than 2.8 has no get_capabilities
        return _proc_cpu_flags()


def _proc_cpu_flags() -> set[str]:
    """The flags of /proc/cpuinfo (Linux; empty elsewhere)."""
    return set(_cpuinfo_field("flags").split())


def _cpu_model() -> str:
    return _cpuinfo_field("model name") or platform.processor() or "unknown"


def _cpuinfo_field(name: str) -> str:
    """The first value of ``name`` in /proc/cpuinfo; "" when there is none."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        if line.split(":", 1)[0].strip() == name:
            return line.split(":", 1)[1].strip()
    return ""

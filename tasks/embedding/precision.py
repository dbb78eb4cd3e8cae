"""Which precision the local embedder runs in: bf16 autocast where it is measurably faster here, else fp32.

Two conditions for bf16 under ``auto``. The CPU computes bf16 natively (``cpu_has_native_bf16``: AVX512-BF16 or
AMX-BF16, and a oneDNN that accepts bf16). And a matrix product shaped like the model's feed-forward layer runs at
least ``BF16_MIN_SPEEDUP`` times as fast in bf16 as in fp32 (``measured_bf16_speedup``, about 0.2 s, once per
process). The flag alone is not enough: on an AMD EPYC with AVX512-BF16 bf16 encoded 2.4x as fast as fp32, but on an
Intel Xeon reporting AVX512-BF16 with AMX hidden by its virtual machine, bf16 ran 0.75x as fast (docs/decisions.md).
``CTXRAG_EMBED_PRECISION=auto|bf16|fp32`` overrides the choice.
"""

from __future__ import annotations

import contextlib
import os
import time
from functools import lru_cache
from pathlib import Path

from ctxrag.storage.errors import InvalidInput

PRECISION_ENV = "CTXRAG_EMBED_PRECISION"
PRECISIONS = ("auto", "bf16", "fp32")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 instructions that compute bf16 (cpuinfo and /proc/cpuinfo names)
BF16_MIN_SPEEDUP = 1.2  # bf16 changes vectors (within 1e-4 cosine): worth it only when clearly faster
CALIBRATION_SHAPE = (2048, 384, 1536)  # tokens, MiniLM's hidden size, its feed-forward size: one batch's layer
CALIBRATION_REPEATS = 5


def choose_precision(requested: str | None = None) -> tuple[str, str]:
    """("bf16" or "fp32", why): ``requested``, else ``CTXRAG_EMBED_PRECISION``, else "auto" (bf16 where faster)."""
    value = (requested if requested is not None else os.environ.get(PRECISION_ENV, "")).strip().lower() or "auto"
    if value not in PRECISIONS:
        raise InvalidInput(f"{PRECISION_ENV}={value!r}: choose one of {', '.join(PRECISIONS)}")
    if value == "fp32":
        return "fp32", f"{PRECISION_ENV}=fp32" if requested is None else "asked for fp32"
    native = cpu_has_native_bf16()
    if value == "bf16":
        why = f"{PRECISION_ENV}=bf16" if requested is None else "asked for bf16"
        return "bf16", why if native else f"{why}; this CPU has no native bf16, so it is likely slower than fp32"
    if not native:
        return "fp32", "auto: the CPU has no native bf16 (AVX512-BF16 or AMX-BF16)"
    try:
        speedup = measured_bf16_speedup()
    except Exception as error:  # noqa: BLE001 - a failed timing must not stop indexing: fp32 always works
        return "fp32", f"auto: the CPU has native bf16, but timing it failed ({type(error).__name__}), so fp32"
    if speedup >= BF16_MIN_SPEEDUP:
        return "bf16", f"auto: the CPU has native bf16 and ran it {speedup:.2f}x as fast as fp32"
    return "fp32", (
        f"auto: the CPU has native bf16 but ran it only {speedup:.2f}x as fast as fp32 (bf16 needs {BF16_MIN_SPEEDUP}x)"
    )


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
        pass
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()

"""Which precision the local embedder runs in, chosen per machine by measurement: int8, bf16 or fp32.

``auto`` first chooses between fp32 (the ONNX graph on onnxruntime) and bf16 (torch autocast: the torch extra, which
``auto`` considers only where torch is installed). bf16 autocast needs two things: the CPU computes bf16 natively
(``cpu_has_native_bf16``: AVX512-BF16 or AMX-BF16, and a oneDNN that accepts bf16), and a matrix product shaped like
the model's feed-forward layer runs at least ``BF16_MIN_SPEEDUP`` times as fast in bf16 as in fp32
(``measured_bf16_speedup``, about 0.2 s): on an Intel Xeon reporting AVX512-BF16 with AMX hidden by its virtual
machine, bf16 ran 0.75x as fast (docs/decisions.md). Then int8 (onnxruntime, ``ctxrag.tasks.embedding.onnx_int8``)
is taken where the real model runs at least ``INT8_MIN_SPEEDUP`` times as fast as in that first choice
(``measured_int8_speedup``: a few windows each way, about 2 s, and the int8 file made once, about 15 s). Where torch
sees a GPU (``cuda_available``), ``auto`` is fp32 on it and nothing is timed. ``CTXRAG_EMBED_PRECISION=auto|int8|bf16|fp32``
overrides the choice.

The ``auto`` decision is made once per machine (``machine_signature``: CPU model and flags, the versions of torch,
transformers, sentence-transformers and onnxruntime) and kept in ``cache_dir()/embed-precision.json``, so every process
and Dask worker of a machine embeds in the same precision. An index keeps the precision it was built in
(``precision_for_index``): vectors of two precisions never mix in one index by chance.
"""

from __future__ import annotations

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
from ctxrag.storage.locks import one_process_at_a_time
from ctxrag.storage.settings import settings
from ctxrag.tasks.embedding.embedder_spec import PRECISIONS as MADE_IN
from ctxrag.tasks.embedding.embedder_spec import EmbedderSpec

PRECISION_ENV = "CTXRAG_EMBED_PRECISION"
PRECISIONS = ("auto", *MADE_IN)
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # x86 instructions that compute bf16 (cpuinfo and /proc/cpuinfo names)
INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")  # x86 instructions onnxruntime's int8 kernels use where present
BF16_MIN_SPEEDUP = 1.2  # bf16 changes vectors (within 1e-4 cosine): worth it only when clearly faster
INT8_MIN_SPEEDUP = 1.1  # int8 changes them more (~0.996 cosine; the suite's mean within 0.4: int8.md)
CALIBRATION_SHAPE = (2048, 384, 1536)  # tokens, MiniLM's hidden size, its feed-forward size: one batch's layer
CALIBRATION_REPEATS = 5
INT8_CALIBRATION = (8, 256, 3)  # windows, word pieces each (the production window), timed rounds after a warm-up
DECISIONS_FILE = "embed-precision.json"  # in cache_dir(): the auto decision per machine signature
SIGNATURE_PACKAGES = ("torch", "transformers", "sentence-transformers", "onnxruntime")  # what runs the model
FP32_RUNTIME = "onnxruntime"  # in the signature: decisions timed against torch's fp32 (before it ran on onnxruntime) are made again
TORCH_EXTRA = "torch"


def choose_precision(requested: str | None = None) -> tuple[str, str]:
    """(precision, why): ``requested``, else ``CTXRAG_EMBED_PRECISION``, else "auto" (the machine's decision)."""
    value = (requested if requested is not None else settings().embed_precision).strip().lower() or "auto"
    if value not in PRECISIONS:
        raise InvalidInput(f"{PRECISION_ENV}={value!r}: choose one of {', '.join(PRECISIONS)}")
    if value == "auto":
        return machine_precision()
    why = f"{PRECISION_ENV}={value}" if requested is None else f"asked for {value}"
    if value == "bf16" and not torch_installed():
        from ctxrag.storage.extras import MissingExtra, install_command

        raise MissingExtra(f"{why}: bf16 runs on torch, which is not installed: {install_command(TORCH_EXTRA)}")
    if value == "bf16" and not cpu_has_native_bf16() and not cuda_available():
        return "bf16", f"{why}; this CPU has no native bf16, so it is likely slower than fp32"
    return value, why


def precision_for_index(recorded: str | None) -> tuple[str, str]:
    """(precision, why) for an index whose live version was built in ``recorded`` (None: new, or built before ctxrag
    recorded it). An index keeps its precision, so a re-index reuses its vectors and never mixes two;
    ``CTXRAG_EMBED_PRECISION=int8|bf16|fp32`` changes it, and every chunk is embedded again (the precision is part of
    a bf16 or int8 vector's key)."""
    forced = settings().embed_precision in MADE_IN
    if recorded in MADE_IN and not forced:
        return (
            recorded,
            f"the index was built in {recorded} and keeps it ({PRECISION_ENV}={'|'.join(MADE_IN)} changes it)",
        )
    chosen, why = choose_precision()
    if recorded in MADE_IN and recorded != chosen:
        why += f"; the index was built in {recorded}, so every chunk is embedded again in {chosen}"
    return chosen, why


def with_index_precision(spec: EmbedderSpec, live: dict[str, Any] | None) -> tuple[EmbedderSpec, str]:
    """``spec`` with the precision index vectors are made in (``precision_for_index`` of the ``live`` manifest's),
    and why; a Voyage spec, or a model from a folder or id (its file's precision), as it is ("")."""
    if not spec.packaged:
        return spec, ""
    recorded = ((live or {}).get("config") or {}).get("embedder", {}).get("precision")
    chosen, why = precision_for_index(recorded)
    return dataclasses.replace(spec, precision=chosen), why


def machine_precision() -> tuple[str, str]:
    """The ``auto`` choice: fp32 on a GPU torch sees, else decided once per machine signature and kept in
    ``cache_dir()``; a decision whose timing failed is not kept (the next process tries again)."""
    if cuda_available():
        return "fp32", "auto: torch sees a GPU, so the model runs on it (cuda) in fp32"
    path = cache_dir() / DECISIONS_FILE
    key = json.dumps(machine_signature(), sort_keys=True)
    with one_process_at_a_time(path.with_name(f"{path.name}.lock")):  # no two processes time each other's work
        decisions = _read_decisions(path)
        if key in decisions:
            kept = decisions[key]
            return kept[
                "precision"
            ], f"{kept['why']} (decided once for this machine on {kept['decided']}, kept in {path})"
        chosen, why, timed = _decide_auto()
        if timed:
            decisions[key] = {"precision": chosen, "why": why, "decided": time.strftime("%Y-%m-%d")}
            _write_decisions(path, decisions)
        return chosen, why


def machine_signature() -> dict[str, str]:
    """What the auto decision depends on, read without importing torch: the CPU model, its bf16 and int8 flags (a
    virtual machine may hide AMX on the same model) and the versions of the libraries that run the model."""
    flags = ",".join(sorted(_proc_cpu_flags() & {*NATIVE_BF16_FLAGS, *INT8_FLAGS}))
    signature = {"cpu": _cpu_model(), "machine": platform.machine(), "flags": flags, "fp32": FP32_RUNTIME}
    for package in SIGNATURE_PACKAGES:
        try:
            signature[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            signature[package] = "absent"
    return signature


def _decide_auto() -> tuple[str, str, bool]:
    """(precision, why, whether the decision is sound to keep): fp32 or bf16, then int8 where measurably faster."""
    chosen, why, sound = _decide_torch()
    from ctxrag.tasks.embedding.onnx_int8 import Int8Refused

    try:
        speedup = measured_int8_speedup(chosen)
    except Int8Refused as error:  # the same file would be refused again: keep the decision
        return chosen, f"{why}; int8 not used: {error}", sound
    except Exception as error:
        return chosen, f"{why}; timing int8 failed ({type(error).__name__}: {error})", False
    if speedup >= INT8_MIN_SPEEDUP:
        return "int8", f"auto: int8 ran the model {speedup:.2f}x as fast as {chosen} ({why})", sound
    return chosen, f"{why}; int8 ran it only {speedup:.2f}x as fast (int8 needs {INT8_MIN_SPEEDUP}x)", sound


def _decide_torch() -> tuple[str, str, bool]:
    """(precision, why, whether the decision is sound to keep): bf16 where torch is installed, native and measurably
    faster; else fp32 (on onnxruntime)."""
    if not torch_installed():
        return "fp32", "auto: fp32 on onnxruntime (bf16 would need torch: the torch extra)", True
    if not cpu_has_native_bf16():
        return "fp32", "auto: the CPU has no native bf16 (AVX512-BF16 or AMX-BF16)", True
    try:
        speedup = measured_bf16_speedup()
    except Exception as error:
        return "fp32", f"auto: the CPU has native bf16, but timing it failed ({type(error).__name__}), so fp32", False
    if speedup >= BF16_MIN_SPEEDUP:
        return "bf16", f"auto: the CPU has native bf16 and ran it {speedup:.2f}x as fast as fp32", True
    return (
        "fp32",
        (
            f"auto: the CPU has native bf16 but ran it only {speedup:.2f}x as fast as fp32 (bf16 needs {BF16_MIN_SPEEDUP}x)"
        ),
        True,
    )


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

    from ctxrag.tasks.embedding.local_runtimes import autocast_to

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


@lru_cache(maxsize=2)
def measured_int8_speedup(first_choice: str) -> float:
    """Seconds of the real model in ``first_choice`` (fp32: the ONNX graph on onnxruntime; bf16: torch) / seconds in
    int8, on ``INT8_CALIBRATION``'s windows: the best of its rounds each, the two interleaved after a warm-up (the
    files are made first if missing). Above 1: int8 is faster here."""
    import numpy as np

    from ctxrag.storage.environment import models_dir
    from ctxrag.tasks.embedding.local_runtimes import (
        int8_encoder,
        packaged_model_path,
        query_encoder,
        sentence_transformer,
        torch_vectors,
    )
    from ctxrag.tasks.embedding.windows import local_special_ids

    windows, tokens, rounds = INT8_CALIBRATION
    first, last, pad = local_special_ids()
    body = np.random.default_rng(0).integers(1000, 29000, size=(windows, tokens - 2)).tolist()
    ids = [[first, *row, last] for row in body]
    spec = EmbedderSpec()
    encoder = int8_encoder(models_dir(), spec.model, spec.max_seq_length)
    if first_choice == "fp32":
        fp32 = query_encoder(models_dir(), spec.model, spec.max_seq_length, documents=True)
        if fp32 is None:
            raise RuntimeError(f"the ONNX graph of {spec.model} could not be made")

        def other() -> None:
            fp32.embed_ids(ids)
    else:
        model = sentence_transformer(str(packaged_model_path()), spec.max_seq_length)

        def other() -> None:
            torch_vectors(model, ids, first_choice, "cpu", windows, pad)

    def seconds(on_other: bool) -> float:
        started = time.perf_counter()
        if on_other:
            other()
        else:
            encoder.embed_ids(ids)
        return time.perf_counter() - started

    seconds(True), seconds(False)  # loads both and builds their kernels
    runs = [(seconds(True), seconds(False)) for _ in range(rounds)]
    return min(slow for slow, _ in runs) / min(fast for _, fast in runs)


def torch_installed() -> bool:
    """Whether torch is installed (the torch extra), known without importing it."""
    try:
        metadata.version("torch")
    except metadata.PackageNotFoundError:
        return False
    return True


def cuda_available() -> bool:
    """Whether torch sees a GPU (``torch.cuda.is_available()``). A CPU-only torch build ("+cpu") cannot: known
    without importing torch. Any failure to tell means no."""
    try:
        if _cpu_only_torch():
            return False
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _cpu_only_torch() -> bool:
    return metadata.version("torch").endswith("+cpu")


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
    except Exception:
        return False


def _cpu_flags() -> set[str]:
    """The CPU's bf16-relevant features that are present, from torch's cpuinfo, else from /proc/cpuinfo."""
    try:
        import torch

        capabilities = torch.cpu.get_capabilities()
        return {name for name in NATIVE_BF16_FLAGS if capabilities.get(name)}
    except Exception:
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

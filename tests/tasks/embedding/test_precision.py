"""The local embedder's precision: bf16 only where the CPU computes it natively and a timing shows it faster here."""

from __future__ import annotations

import math

import pytest

import ctxrag.tasks.embedding.precision as precision
from ctxrag.tasks.embedding.embed import EmbedderSpec, LocalEmbedder
from ctxrag.tasks.embedding.precision import BF16_MIN_SPEEDUP, PRECISION_ENV, choose_precision


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch):
    """Set what the CPU detection and the timing answer; the env var starts unset. A speedup of None: timing fails."""
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    timed: list[bool] = []

    def answer(native: bool, speedup: float | None = 2.0) -> list[bool]:
        def measured() -> float:
            timed.append(True)
            if speedup is None:
                raise RuntimeError("oneDNN refused")
            return speedup

        monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
        monkeypatch.setattr(precision, "measured_bf16_speedup", measured)
        timed.clear()
        return timed

    return answer


def test_auto_picks_bf16_where_the_cpu_has_it_and_it_is_faster(cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu(True, 2.4)
    chosen, reason = choose_precision()
    assert chosen == "bf16" and "2.40x as fast" in reason
    monkeypatch.setenv(PRECISION_ENV, "auto")
    assert choose_precision()[0] == "bf16"


def test_auto_keeps_fp32_where_native_bf16_is_not_faster(cpu) -> None:
    """An Intel Xeon reporting AVX512-BF16 (AMX hidden) ran bf16 slower than fp32: the flag alone must not decide."""
    cpu(True, 0.7)
    chosen, reason = choose_precision()
    assert chosen == "fp32" and "only 0.70x" in reason
    cpu(True, BF16_MIN_SPEEDUP - 0.01)
    assert choose_precision()[0] == "fp32"
    cpu(True, BF16_MIN_SPEEDUP)
    assert choose_precision()[0] == "bf16"


def test_without_native_bf16_nothing_is_timed(cpu) -> None:
    timed = cpu(False)
    chosen, reason = choose_precision()
    assert chosen == "fp32" and "no native bf16" in reason and not timed


def test_a_failed_timing_means_fp32(cpu) -> None:
    cpu(True, None)
    chosen, reason = choose_precision()
    assert chosen == "fp32" and "timing it failed (RuntimeError)" in reason


def test_the_env_var_overrides_detection_and_timing(cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    timed = cpu(True, 3.0)
    monkeypatch.setenv(PRECISION_ENV, "fp32")
    assert choose_precision() == ("fp32", f"{PRECISION_ENV}=fp32")
    timed = cpu(True, 0.5)
    monkeypatch.setenv(PRECISION_ENV, " BF16 ")
    assert choose_precision() == ("bf16", f"{PRECISION_ENV}=bf16") and not timed
    cpu(False)
    chosen, reason = choose_precision()
    assert chosen == "bf16" and "likely slower" in reason  # forced, with a word that it will not be faster


def test_an_unknown_precision_is_refused(cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRECISION_ENV, "fp16")
    with pytest.raises(ValueError, match=PRECISION_ENV):
        choose_precision()


def test_an_explicit_precision_wins_over_the_env_var(cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu(False)
    monkeypatch.setenv(PRECISION_ENV, "bf16")
    assert LocalEmbedder(EmbedderSpec(), precision="fp32").precision == "fp32"
    cpu(True, 2.0)
    monkeypatch.delenv(PRECISION_ENV)
    assert LocalEmbedder(EmbedderSpec()).precision == "bf16"


def test_detection_needs_a_native_bf16_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """oneDNN's own check is true on any AVX-512 CPU (bf16 emulated): without AVX512-BF16 / AMX-BF16 it is fp32."""
    monkeypatch.setattr(precision, "_onednn_bf16", lambda: True)
    monkeypatch.setattr(precision, "_cpu_flags", lambda: {"avx512f", "avx512bw"})
    assert precision.cpu_has_native_bf16() is False
    monkeypatch.setattr(precision, "_cpu_flags", lambda: {"avx512f", "amx_bf16"})
    assert precision.cpu_has_native_bf16() is True
    monkeypatch.setattr(precision, "_cpu_flags", lambda: {"avx512_bf16"})
    assert precision.cpu_has_native_bf16() is True
    monkeypatch.setattr(precision, "_onednn_bf16", lambda: False)  # a torch without oneDNN
    assert precision.cpu_has_native_bf16() is False


@pytest.mark.slow  # torch, timed in both precisions
def test_the_timing_runs_here_and_is_measured_once_per_process() -> None:
    """The real measurement on this machine's torch: a positive ratio, cached (one timing per process)."""
    precision.measured_bf16_speedup.cache_clear()
    first = precision.measured_bf16_speedup()
    assert math.isfinite(first) and first > 0
    assert precision.measured_bf16_speedup() == first
    assert precision.measured_bf16_speedup.cache_info().hits >= 1

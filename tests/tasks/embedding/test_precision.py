"""The local embedder's precision: bf16 only where the CPU computes it natively and a timing shows it faster here;
int8 where the real model is timed faster than torch's choice; fp32 on a GPU torch sees."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import ctxrag.tasks.embedding.precision as precision
from ctxrag.tasks.embedding.embed import EmbedderSpec, LocalEmbedder
from ctxrag.tasks.embedding.embedder_spec import INT8_RECIPE
from ctxrag.tasks.embedding.onnx_int8 import Int8Refused
from ctxrag.tasks.embedding.precision import (
    BF16_MIN_SPEEDUP,
    INT8_MIN_SPEEDUP,
    PRECISION_ENV,
    choose_precision,
    precision_for_index,
)

REAL_CUDA_CHECK = precision.cuda_available  # taken before any fixture replaces it


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Set what the CPU detection and the timings answer; the env var starts unset, the cache folder empty, no GPU.
    A speedup of None: timing fails; ``int8``: int8's speedup over torch's choice (an exception: raised).
    ``forget``: as on a new machine, with no decision kept. Returns the timings run (bf16's, then int8's with the
    precision it was timed against)."""
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    monkeypatch.setenv("CTXRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(precision, "cuda_available", lambda: False)
    timed: list[object] = []

    def answer(
        native: bool, speedup: float | None = 2.0, forget: bool = True, int8: float | Exception = 1.0
    ) -> list[object]:
        if forget:
            (tmp_path / "cache" / precision.DECISIONS_FILE).unlink(missing_ok=True)

        def measured() -> float:
            timed.append(True)
            if speedup is None:
                raise RuntimeError("oneDNN refused")
            return speedup

        def measured_int8(against: str) -> float:
            timed.append(against)
            if isinstance(int8, Exception):
                raise int8
            return int8

        monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
        monkeypatch.setattr(precision, "measured_bf16_speedup", measured)
        monkeypatch.setattr(precision, "measured_int8_speedup", measured_int8)
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


def test_without_native_bf16_bf16_is_not_timed(cpu) -> None:
    timed = cpu(False)
    chosen, reason = choose_precision()
    assert chosen == "fp32" and "no native bf16" in reason and timed == ["fp32"]  # int8 is timed against fp32


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


def test_the_auto_decision_is_made_once_per_machine_and_kept_in_the_cache_folder(
    cpu, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every process (and Dask worker) of a machine embeds in the same precision: the timing runs once, not per process."""
    timed = cpu(True, 2.4)
    assert choose_precision()[0] == "bf16" and timed == [True, "bf16"]
    timed = cpu(True, 0.5, forget=False)  # a later process, whose timing would have said otherwise
    chosen, reason = choose_precision()
    assert chosen == "bf16" and not timed
    assert "2.40x as fast" in reason and "decided once for this machine" in reason
    assert (tmp_path / "cache" / precision.DECISIONS_FILE).is_file()
    signature = precision.machine_signature()
    monkeypatch.setattr(
        precision, "machine_signature", lambda: {**signature, "torch": "99.0"}
    )  # another torch: decided again
    assert choose_precision()[0] == "fp32" and timed == [True, "fp32"]
    monkeypatch.setenv(PRECISION_ENV, "bf16")  # the variable still overrides the kept decision
    assert choose_precision() == ("bf16", f"{PRECISION_ENV}=bf16")


def test_a_failed_timing_is_not_kept(cpu) -> None:
    cpu(True, None)
    assert choose_precision()[0] == "fp32"
    timed = cpu(True, 2.0, forget=False)
    assert choose_precision()[0] == "bf16" and timed  # timed again: a failure may pass


def test_the_signature_names_the_cpu_and_the_libraries_that_run_the_model() -> None:
    signature = precision.machine_signature()
    assert {"cpu", "machine", "flags", "torch", "transformers", "sentence-transformers", "onnxruntime"} <= set(
        signature
    )
    assert signature["cpu"] and signature["torch"] != "absent"


def test_an_index_keeps_its_precision_unless_the_variable_changes_it(cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    cpu(True, 2.4)  # this machine would pick bf16
    assert precision_for_index(None)[0] == "bf16"  # a new index: the machine's choice
    chosen, reason = precision_for_index("fp32")
    assert chosen == "fp32" and "built in fp32" in reason  # an index built in fp32 stays fp32: its vectors are reused
    monkeypatch.setenv(PRECISION_ENV, "bf16")
    chosen, reason = precision_for_index("fp32")
    assert chosen == "bf16" and "every chunk is embedded again in bf16" in reason


def test_a_bf16_vector_has_its_own_key_and_an_fp32_one_keeps_the_old_key() -> None:
    plain, fp32, bf16 = EmbedderSpec(), EmbedderSpec(precision="fp32"), EmbedderSpec(precision="bf16")
    assert fp32.cache_key("text", "document") == plain.cache_key("text", "document")
    assert bf16.cache_key("text", "document") != fp32.cache_key("text", "document")
    assert bf16.cache_key("a query", "query") == fp32.cache_key("a query", "query")  # queries: ONNX, fp32 always
    assert EmbedderSpec.from_dict(bf16.to_dict()) == bf16 and "precision" not in plain.to_dict()


def test_auto_picks_int8_where_the_model_runs_faster_in_it_than_in_torch_s_choice(cpu) -> None:
    timed = cpu(True, 2.4, int8=1.3)
    chosen, reason = choose_precision()
    assert chosen == "int8" and timed == [True, "bf16"] and "1.30x as fast as bf16" in reason
    cpu(False, int8=INT8_MIN_SPEEDUP)
    assert choose_precision()[0] == "int8"
    cpu(False, int8=INT8_MIN_SPEEDUP - 0.01)
    chosen, reason = choose_precision()
    assert chosen == "fp32" and f"int8 needs {INT8_MIN_SPEEDUP}x" in reason


def test_an_int8_file_that_cannot_be_made_keeps_torch_s_choice_and_a_failed_timing_is_tried_again(cpu) -> None:
    cpu(True, 2.4, int8=Int8Refused("not within tolerance"))
    chosen, reason = choose_precision()
    assert chosen == "bf16" and "int8 not used: not within tolerance" in reason
    timed = cpu(True, 2.4, forget=False, int8=1.5)
    assert choose_precision()[0] == "bf16" and not timed  # refused: the same answer again, so kept
    cpu(True, 2.4, int8=OSError("disk full"))
    chosen, reason = choose_precision()
    assert chosen == "bf16" and "timing int8 failed (OSError" in reason
    timed = cpu(True, 2.4, forget=False, int8=1.5)
    assert choose_precision()[0] == "int8" and timed  # a failure may pass: timed again


def test_int8_is_asked_for_by_the_variable_and_an_int8_index_keeps_it(cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    timed = cpu(True, 2.4, int8=0.5)
    monkeypatch.setenv(PRECISION_ENV, "int8")
    assert choose_precision() == ("int8", f"{PRECISION_ENV}=int8") and not timed
    monkeypatch.delenv(PRECISION_ENV)
    assert precision_for_index("int8")[0] == "int8"  # this machine would pick bf16 now: the index keeps int8
    assert precision_for_index("bf16")[0] == "bf16"
    monkeypatch.setenv(PRECISION_ENV, "fp32")
    chosen, reason = precision_for_index("int8")
    assert chosen == "fp32" and "built in int8, so every chunk is embedded again in fp32" in reason


def test_where_torch_sees_a_gpu_auto_is_fp32_on_cuda_and_nothing_is_timed(cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    timed = cpu(True, 2.4, int8=3.0)
    monkeypatch.setattr(precision, "cuda_available", REAL_CUDA_CHECK)  # the fixture's "no GPU" undone
    monkeypatch.setattr(precision, "_cpu_only_torch", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    chosen, reason = choose_precision()
    assert chosen == "fp32" and "GPU" in reason and not timed
    assert not (precision.cache_dir() / precision.DECISIONS_FILE).exists()  # a GPU may come and go: not kept
    assert LocalEmbedder(EmbedderSpec()).device == "cuda"
    assert LocalEmbedder(EmbedderSpec(), precision="bf16").device == "cuda"
    assert LocalEmbedder(EmbedderSpec(), precision="int8").device == "cpu"  # int8 runs on onnxruntime's CPU provider
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert LocalEmbedder(EmbedderSpec(), precision="fp32").device == "cpu"


def test_an_int8_vector_has_its_own_key_for_documents_and_queries() -> None:
    fp32, bf16, int8 = EmbedderSpec(precision="fp32"), EmbedderSpec(precision="bf16"), EmbedderSpec(precision="int8")
    for input_type in ("document", "query"):
        assert int8.cache_key("text", input_type) not in {
            fp32.cache_key("text", input_type),
            bf16.cache_key("text", input_type),
        }
    assert int8.cache_key("text", "document") != int8.cache_key("text", "query")
    assert EmbedderSpec.from_dict(int8.to_dict()) == int8 and int8.to_dict()["precision"] == "int8"
    assert INT8_RECIPE.startswith("int8")
    with pytest.raises(ValueError, match="int8, bf16, fp32"):
        EmbedderSpec(precision="fp16")

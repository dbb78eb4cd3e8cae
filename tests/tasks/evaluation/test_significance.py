"""Paired bootstrap over queries: degenerate cases, a hand-computed small example, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from ctxrag.tasks.evaluation.significance import PairedBootstrap, paired_bootstrap


def test_identical_strategies_give_the_interval_zero_zero() -> None:
    values = [0.0, 0.5, 1.0, 1.0, 0.25, 0.0]
    result = paired_bootstrap(values, list(values))
    assert (result.mean_difference, result.low, result.high) == (0.0, 0.0, 0.0)
    assert result.excludes_zero is False
    assert (result.resamples, result.queries, result.confidence) == (10_000, 6, 0.95)


def test_better_on_every_query_excludes_zero() -> None:
    rng = np.random.default_rng(7)
    b = rng.uniform(0, 0.5, size=40)
    a = b + rng.uniform(0.01, 0.3, size=40)
    result = paired_bootstrap(a, b)
    assert result.excludes_zero is True
    assert 0 < result.low <= result.mean_difference <= result.high
    assert result.mean_difference == pytest.approx(float(np.mean(a - b)))


def test_worse_on_every_query_excludes_zero_below() -> None:
    result = paired_bootstrap([0.0, 0.1, 0.2], [0.5, 0.5, 0.5])
    assert result.excludes_zero is True and result.high < 0
    assert result.mean_difference == pytest.approx(-0.4)


def test_two_queries_one_win_one_tie() -> None:
    # differences [1, 0]: a resample's mean is 0 (p 1/4), 0.5 (p 1/2) or 1 (p 1/4).
    # The 2.5% and 97.5% quantiles fall inside the 25% masses at 0 and at 1: interval [0, 1], which holds 0.
    result = paired_bootstrap([1.0, 0.0], [0.0, 0.0])
    assert result == PairedBootstrap(0.5, 0.0, 1.0, False, 0.95, 10_000, 2)


def test_four_queries_three_wins_one_tie() -> None:
    # differences [1, 1, 1, 0]: a resample's mean is j / 4 with j ~ Binomial(4, 3/4).
    # P(j = 0) = 1/256 = 0.4% < 2.5% < P(j <= 1) = 13/256 = 5.1%  -> low = 0.25
    # P(j = 4) = 81/256 = 31.6% > 2.5%                              -> high = 1.0
    result = paired_bootstrap([1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0])
    assert result.mean_difference == pytest.approx(0.75)
    assert (result.low, result.high) == (pytest.approx(0.25), pytest.approx(1.0))
    assert result.excludes_zero is True
    # at 99.9% the 0.05% tail reaches into j = 0 (0.4%): the interval now holds 0
    wider = paired_bootstrap([1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], confidence=0.999)
    assert wider.low == 0.0 and wider.excludes_zero is False


def test_the_seed_fixes_the_interval_and_swapping_negates_it() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.uniform(size=25), rng.uniform(size=25)
    first = paired_bootstrap(a, b, seed=11)
    assert paired_bootstrap(a, b, seed=11) == first
    assert paired_bootstrap(a, b, seed=12) != first
    swapped = paired_bootstrap(b, a, seed=11)
    assert swapped.mean_difference == pytest.approx(-first.mean_difference)
    assert (swapped.low, swapped.high) == (pytest.approx(-first.high), pytest.approx(-first.low))


def test_resample_count_is_respected_across_batches() -> None:
    result = paired_bootstrap([1.0, 0.0, 0.5], [0.0, 0.0, 0.0], resamples=2_345)
    assert result.resamples == 2_345
    assert 0.0 <= result.low <= result.high <= 1.0


@pytest.mark.parametrize(
    ("a", "b", "kwargs", "message"),
    [
        ([1.0], [1.0, 0.0], {}, "equally long"),
        ([], [], {}, "at least one query"),
        ([1.0, float("nan")], [0.0, 0.0], {}, "finite"),
        ([1.0], [0.0], {"resamples": 0}, "resamples"),
        ([1.0], [0.0], {"confidence": 1.0}, "confidence"),
    ],
)
def test_bad_input_is_refused(a: list[float], b: list[float], kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(a, b, **kwargs)  # type: ignore[arg-type]

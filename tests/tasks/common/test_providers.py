"""Providers, and the limits of the paid ones that no command option reaches."""

from __future__ import annotations

import pytest

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.settings import DEFAULT_IN_FLIGHT
from ctxrag.tasks.common.providers import Provider, limits_from_environment


def test_voyage_and_cohere_limits_default_to_four_calls_and_no_token_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VOYAGE", "COHERE"):
        monkeypatch.delenv(f"CTXRAG_{name}_CONCURRENCY", raising=False)
        monkeypatch.delenv(f"CTXRAG_{name}_TOKENS_PER_MINUTE", raising=False)
    assert (
        limits_from_environment(Provider.VOYAGE)
        == limits_from_environment(Provider.COHERE)
        == (DEFAULT_IN_FLIGHT, None)
    )


def test_both_voyage_embedders_share_voyages_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXRAG_VOYAGE_CONCURRENCY", "2")
    monkeypatch.setenv("CTXRAG_VOYAGE_TOKENS_PER_MINUTE", "3000000")
    assert (
        limits_from_environment(Provider.VOYAGE_CONTEXT) == limits_from_environment(Provider.VOYAGE) == (2, 3_000_000.0)
    )


@pytest.mark.parametrize(
    "variable, value",
    [
        ("CTXRAG_COHERE_CONCURRENCY", "four"),
        ("CTXRAG_COHERE_CONCURRENCY", "0"),
        ("CTXRAG_COHERE_TOKENS_PER_MINUTE", "-5"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidInput, match=variable):
        limits_from_environment(Provider.COHERE)

"""Per-model facts the run depends on: prices, minimum cacheable prompt length, context window.

Prices are US dollars per million tokens (list prices; edit here when they change, with ``PRICES_AS_OF``). Cache
writes cost 1.25x the input price (5-minute TTL) or 2x (1-hour TTL); cache reads 0.1x; the Message Batches API halves
everything. A run prices an unknown model at ``DEFAULT_FACTS``; a plan (``priced_facts``) refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxrag.storage.errors import InvalidInput

if TYPE_CHECKING:
    from ctxrag.storage.ledger import LedgerRow


@dataclass(frozen=True)
class ModelFacts:
    input_per_mtok: float
    output_per_mtok: float
    min_cacheable_tokens: int
    context_window: int = 200_000


PRICES_AS_OF = "2026-11-30"  # when the list prices below were recorded here
PRICES_FILE = "tasks/context/claude/pricing.py"

# Longest matching prefix wins.
MODEL_FACTS: dict[str, ModelFacts] = {
    "claude-haiku-4-5": ModelFacts(1.00, 5.00, 4096),
    "claude-sonnet-4": ModelFacts(3.00, 15.00, 1024),
    "claude-opus-4-5": ModelFacts(5.00, 25.00, 4096),
    "claude-opus-4-6": ModelFacts(5.00, 25.00, 4096),
    "claude-opus-4-1": ModelFacts(15.00, 75.00, 1024),
    "claude-opus-4-0": ModelFacts(15.00, 75.00, 1024),
    "claude-3-5-haiku": ModelFacts(0.80, 4.00, 2048),
    "claude-3-haiku": ModelFacts(0.25, 1.25, 2048),
}
DEFAULT_FACTS = ModelFacts(3.00, 15.00, 1024)

CACHE_WRITE_MULTIPLIER = {"5m": 1.25, "1h": 2.0}
CACHE_READ_MULTIPLIER = 0.1
BATCH_DISCOUNT = 0.5


class UnknownModelPrices(InvalidInput):
    """A plan was asked for a model whose prices ctxrag does not know."""


def facts_for(model: str) -> ModelFacts:
    matches = [prefix for prefix in MODEL_FACTS if model.startswith(prefix)]
    return MODEL_FACTS[max(matches, key=len)] if matches else DEFAULT_FACTS


def priced_facts(model: str) -> ModelFacts:
    """The model's facts, or ``UnknownModelPrices`` naming the model and where prices live (no guessed default)."""
    if not any(model.startswith(prefix) for prefix in MODEL_FACTS):
        known = ", ".join(sorted(MODEL_FACTS))
        raise UnknownModelPrices(
            f"no known prices for Claude model {model!r}: add them to MODEL_FACTS in {PRICES_FILE} (known: {known})"
        )
    return facts_for(model)


@dataclass(frozen=True)
class Usage:
    """Token counts of one call, as the API reports them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0

    @classmethod
    def from_api(cls, usage: object) -> Usage:
        def field(name: str) -> int:
            return int(getattr(usage, name, None) or 0)

        return cls(
            field("input_tokens"),
            field("output_tokens"),
            field("cache_creation_input_tokens"),
            field("cache_read_input_tokens"),
        )

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens


def charge(row: LedgerRow, model: str, usage: Usage, ttl: str = "5m", batch: bool = False) -> None:
    """Fill a ledger row's token counts and costs from one call's usage."""
    row.input_tokens, row.output_tokens = usage.input_tokens, usage.output_tokens
    row.cache_write_tokens, row.cache_read_tokens = usage.cache_write_tokens, usage.cache_read_tokens
    row.cost_usd = cost_usd(model, usage, ttl, batch)
    row.cost_without_cache_usd = cost_without_caching_usd(model, usage, batch)


def cost_usd(model: str, usage: Usage, ttl: str = "5m", batch: bool = False) -> float:
    """What the call cost."""
    facts = facts_for(model)
    dollars = (
        usage.input_tokens * facts.input_per_mtok
        + usage.cache_write_tokens * facts.input_per_mtok * CACHE_WRITE_MULTIPLIER[ttl]
        + usage.cache_read_tokens * facts.input_per_mtok * CACHE_READ_MULTIPLIER
        + usage.output_tokens * facts.output_per_mtok
    ) / 1_000_000
    return dollars * (BATCH_DISCOUNT if batch else 1.0)


def cost_without_caching_usd(model: str, usage: Usage, batch: bool = False) -> float:
    """What the same call would have cost with every prompt token billed as plain input."""
    facts = facts_for(model)
    dollars = (usage.prompt_tokens * facts.input_per_mtok + usage.output_tokens * facts.output_per_mtok) / 1_000_000
    return dollars * (BATCH_DISCOUNT if batch else 1.0)

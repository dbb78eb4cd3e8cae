"""Search strategies by name, with their parameters: what ``--strategy`` takes, ``ctxrag tune`` chooses and an index
keeps. Plain values only (no numpy), so a request is checked before anything heavy is imported; the strategies run in
``ctxrag.tasks.retrieval.search``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import Any, cast

from ctxrag.storage.errors import InvalidInput
from ctxrag.storage.fusion import RRF_K

# hybrid-score: chosen leave-one-corpus-out on the evaluation suite (benchmarks/suite.py, docs/decisions.md).
SCORE_FUSION_VECTOR_WEIGHT = 0.5


class Strategy(str, Enum):
    VECTOR = "vector"
    BM25 = "bm25"
    HYBRID = "hybrid"  # RRF
    HYBRID_WEIGHTED = "hybrid-weighted"  # the cookbook's weighted 1/rank
    HYBRID_DOC = "hybrid-doc"  # weighted RRF with document and definition evidence (document_fusion)
    HYBRID_SCORE = "hybrid-score"  # CombSUM of standardized scores (score_fusion)

    @classmethod
    def from_str(cls, value: str) -> Strategy:
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(strategy.value for strategy in cls)
            raise InvalidInput(f"unknown strategy {value!r}; choose one of: {choices}") from None


DEFAULT_STRATEGY = "hybrid-score"  # chosen leave-one-corpus-out on the evaluation suite (docs/decisions.md)
_WRITTEN = re.compile(r"(?P<name>[a-z0-9-]+)(?:\((?P<parameters>[^()]*)\))?")


@dataclass(frozen=True)
class StrategyConfig:
    """A strategy with its parameters: what ``ctxrag tune`` chooses and an index keeps. ``rrf_k``: ``hybrid``'s RRF
    constant; ``vector_weight``: ``hybrid-score``'s weight of the vector side (BM25 gets the rest). Written as the
    strategy's name with the parameters that differ from the defaults in brackets: ``hybrid-score(vector_weight=0.3)``."""

    strategy: Strategy
    rrf_k: int = RRF_K
    vector_weight: float = SCORE_FUSION_VECTOR_WEIGHT

    def __post_init__(self) -> None:
        if self.rrf_k < 0:
            raise InvalidInput(f"rrf_k must be 0 or more, got {self.rrf_k}")
        if not 0.0 <= self.vector_weight <= 1.0:
            raise InvalidInput(f"vector_weight must be between 0 and 1, got {self.vector_weight}")

    @property
    def parameters(self) -> dict[str, Any]:
        """The parameters this strategy reads, with their values."""
        names = {Strategy.HYBRID: ("rrf_k",), Strategy.HYBRID_SCORE: ("vector_weight",)}.get(self.strategy, ())
        return {name: getattr(self, name) for name in names}

    @property
    def label(self) -> str:
        default = StrategyConfig(self.strategy)
        changed = {name: value for name, value in self.parameters.items() if value != getattr(default, name)}
        return self.strategy.value + (
            f"({', '.join(f'{name}={value:g}' for name, value in changed.items())})" if changed else ""
        )

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy.value, **self.parameters}

    @classmethod
    def of(cls, strategy: Strategy | StrategyConfig) -> StrategyConfig:
        return strategy if isinstance(strategy, StrategyConfig) else cls(strategy)

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> StrategyConfig:
        """What ``to_dict`` wrote (an index's saved choice)."""
        return cls.from_str(str(value.get("strategy"))).with_parameters(
            {k: v for k, v in value.items() if k != "strategy"}
        )

    @classmethod
    def from_str(cls, value: str) -> StrategyConfig:
        """``hybrid-score`` or ``hybrid-score(vector_weight=0.3)``; a bad name or parameter is an ``InvalidInput``."""
        written = _WRITTEN.fullmatch(value.strip().replace(" ", ""))
        if written is None:
            raise InvalidInput(
                f"cannot read strategy {value!r}; write a name, e.g. hybrid, or hybrid-score(vector_weight=0.3)"
            )
        config = cls(Strategy.from_str(written["name"]))
        given = {}
        for item in filter(None, (written["parameters"] or "").split(",")):
            name, equals, number = item.partition("=")
            if not equals:
                raise InvalidInput(f"strategy {value!r}: write each parameter as name=value")
            given[name] = number
        return config.with_parameters(given)

    def with_parameters(self, given: Mapping[str, Any]) -> StrategyConfig:
        """This configuration with ``given`` parameter values (numbers or their text); only its strategy's own."""
        known = self.parameters
        typed = {field.name: field.type for field in fields(self)}
        values = {}
        for name, raw in given.items():
            if name not in known:
                allowed = ", ".join(known) or "none"
                raise InvalidInput(
                    f"strategy {self.strategy.value} has no parameter {name!r} (its parameters: {allowed})"
                )
            try:
                values[name] = int(raw) if typed[name] == "int" else float(raw)
            except (TypeError, ValueError):
                raise InvalidInput(f"strategy {self.strategy.value}: {name}={raw!r} is not a number") from None
        return replace(self, **cast(dict[str, Any], values))

"""What ``ctxrag tune`` would keep on each suite set: the product's candidates (``ctxrag.tasks.evaluation.tune``)
scored on every question with the set's primary metric, then the product's own decision (``decide``: folds grouped
by golden document; the choice is kept only if its held-out figure beats the default; under 30 questions the default
stays). A tuned index is expected to score the cross-validated figure when the choice is kept, else the default's.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from suite_fusion import product
from ctxrag.tasks.evaluation.tune import CANDIDATES, decide
from ctxrag.tasks.retrieval.search import StrategyConfig


def suite_variant(config: StrategyConfig) -> tuple[Callable[..., list[int]], dict]:
    """The suite's ranking of a product candidate: the product's own fusion (suite_fusion.product) of its label."""
    return product, {"strategy": config.label}


def tuned(data) -> dict:
    """``tune``'s outcome on one set (``suite_sets.SetData``): what it keeps, the cross-validated figure, the default's,
    and the figure to expect (the cross-validated one if the choice is kept, else the default's)."""
    values = np.array([[data.score(i, data.rank(i, *suite_variant(config)), [data.primary])[0] for i in range(len(data.texts))]
                       for config in CANDIDATES])
    outcome = decide(values, data.clusters.tolist(), data.primary)
    return {"kept": outcome.choice.label if outcome.choice else None, "reason": outcome.reason, "cv": outcome.cv,
            "default": outcome.default, "expected": outcome.cv if outcome.choice else outcome.default, "fold picks": outcome.fold_picks}

"""What ``ctxrag tune`` would keep on each suite set: the product's candidates (``ctxrag.tasks.evaluation.tune``)
scored on every question with the set's primary metric, then the product's own decision (``decide``)."""

from __future__ import annotations

import numpy as np

from ctxrag.tasks.evaluation.tune import CANDIDATES, decide


def tuned(data) -> dict:
    """``tune``'s outcome on one set (``suite_sets.SetData``): what it keeps, the cross-validated figure, the default's,
    and the figure to expect (the cross-validated one if the choice is kept, else the default's)."""
    values = np.array([[data.score(i, data.rank(i, config.label), [data.primary])[0] for i in range(len(data.texts))]
                       for config in CANDIDATES])
    outcome = decide(values, data.clusters.tolist(), data.primary)
    return {"kept": outcome.choice.label if outcome.choice else None, "reason": outcome.reason, "cv": outcome.cv,
            "default": outcome.default, "expected": outcome.cv if outcome.choice else outcome.default, "fold picks": outcome.fold_picks}

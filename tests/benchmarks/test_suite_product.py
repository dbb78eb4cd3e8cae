"""The evaluation suite scores the shipped code: the strategies it ranks are exactly the product's strategies and
``ctxrag tune``'s candidates, each through the product's fusion (``ctxrag.tasks.retrieval.search.fuse_rankings``, the
function ``Searcher.fuse`` runs), and on a hand-built index its ranking of every question is what a ``Searcher``
search returns."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import suite_select as select
import suite_sets as sets_

from ctxrag.tasks.evaluation.tune import CANDIDATES
from ctxrag.tasks.retrieval import search
from ctxrag.tasks.retrieval.search import Strategy, StrategyConfig
from tests.equipment.fixed_searcher import make_searcher

WORDS = ["lemon", "mango", "melon", "kiwi", "grape", "header", "parse", "request", "client", "stream"]
QUERIES = [
    "where is parse_header",
    "lemon mango",
    "how does the client stream a request",
    "melon_kiwi grape",
    "parse header line",
    "what calls StreamClient",
    "kiwi",
    "nothing matches this",
    "lemon_grape or request_parse",
]
SUITE_STRATEGIES = select.configs()


def fixture() -> tuple[object, sets_.SetData]:
    """A 36-chunk index of 12 documents (some chunks define names the questions mention; fixed vector scores with
    ties) and the suite's set of QUERIES over it, cached and viewed as suite.py does."""
    rng = np.random.default_rng(0)
    texts = []
    for i in range(36):
        a, b, c, d = rng.choice(WORDS, 4, replace=False)
        texts.append(f"def {a}_{b}(x):\n    return {c} {d}" if i % 4 == 0 else " ".join(rng.choice(WORDS, 6)))
    texts[4] = "def parse_header(line):\n    return line"
    texts[9] = "class StreamClient:\n    pass"
    texts[10] = texts[11] = (
        "client = StreamClient(StreamClient.stream(request))"  # BM25 ranks these above the definition
    )
    vector = rng.random(36).astype(np.float32)
    vector[[5, 7, 30]] = vector[2]  # ties: broken by the best single rank, then the row
    doc_ids = [f"d{i // 3}" for i in range(36)]
    searcher = make_searcher(texts, vector, doc_ids=doc_ids)
    arrays = sets_.rank_arrays(searcher, QUERIES)
    numbering = {doc: number for number, doc in enumerate(dict.fromkeys(doc_ids))}
    doc_of_row = np.array([numbering[doc] for doc in doc_ids])
    defines = {row: frozenset(names) for row, names in enumerate(sets_.chunk_defines(searcher.index)) if names}
    assert defines  # the fixture exercises hybrid-doc's definition evidence
    data = sets_.SetData(
        "fixture",
        "fixture",
        "fixture",
        "chunk",
        ["mrr@10"],
        "code",
        "fixture",
        "",
        QUERIES,
        [np.array([0])] * len(QUERIES),
        np.zeros(len(QUERIES)),
        doc_of_row,
        arrays=arrays,
        defines=defines,
    )
    return searcher, data


def test_the_suite_scores_exactly_the_products_strategies_and_tunes_candidates() -> None:
    assert sets_.fuse_rankings is search.fuse_rankings
    assert select.FIXED == tuple(dict.fromkeys(select.FIXED)) and set(select.FIXED) == {
        strategy.value for strategy in Strategy
    }
    assert set(SUITE_STRATEGIES) == set(select.FIXED) | {config.label for config in CANDIDATES}
    for label in SUITE_STRATEGIES:
        assert StrategyConfig.from_str(label).label == label


def test_the_suite_ranks_each_product_strategy_as_a_search_does(monkeypatch) -> None:
    searcher, data = fixture()
    calls = []
    monkeypatch.setattr(
        sets_, "fuse_rankings", lambda *args, **kwargs: calls.append(args[0]) or search.fuse_rankings(*args, **kwargs)
    )
    for label in SUITE_STRATEGIES:
        config = StrategyConfig.from_str(label)
        for i, text in enumerate(QUERIES):
            expected = [hit.row for hit in searcher.search(text, config, sets_.RANKED)]
            assert data.rank(i, label) == expected, (label, text)
    assert len(calls) == len(SUITE_STRATEGIES) * len(QUERIES)  # every ranking came from the product's function


def test_the_fixture_tells_the_strategies_apart() -> None:
    _, data = fixture()
    rankings = {label: [data.rank(i, label) for i in range(len(QUERIES))] for label in SUITE_STRATEGIES}
    assert (
        len({str(ranking) for ranking in rankings.values()}) >= 8
    )  # a test every strategy could pass alike proves little

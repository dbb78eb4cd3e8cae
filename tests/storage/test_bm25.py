"""The embedded BM25 index (bm25s, Lucene variant) over ctxrag.storage.tokenize terms."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ctxrag.storage.bm25 import Bm25Index, Postings
from ctxrag.storage.errors import CorruptIndexError
from ctxrag.storage.tokenize import tokenize
from tests.helpers import SAMPLE_CORPUS, SAMPLE_QUESTIONS, SHARED_DATA

# Words that survive tokenization unchanged (no stop words, stemming leaves them as they are).
TOY = ["lemon kiwi", "lemon lemon mango", "kiwi mango melon grape"]


def test_toy_words_survive_tokenization_unchanged() -> None:
    assert [tokenize(text) for text in TOY] == [text.split() for text in TOY]


def test_document_with_query_term_ranks_above_one_without() -> None:
    index = Bm25Index.build(
        ["the worker retries failed tasks", "configuration of the storage backend", "unrelated prose"]
    )
    scores = index.scores("retry")
    assert scores.shape == (3,)
    assert scores.dtype == np.float32
    assert scores[0] > 0
    assert scores[1] == 0 and scores[2] == 0
    assert int(np.argmax(scores)) == 0


def test_stemmed_and_split_query_terms_match() -> None:
    index = Bm25Index.build(["class QueueWorker: pass", "def storage_backend(): pass"])
    # "workers" stems to "worker", a part of the identifier QueueWorker
    scores = index.scores("workers")
    assert scores[0] > 0 and scores[1] == 0
    scores = index.scores("backend")
    assert scores[1] > 0 and scores[0] == 0


def test_scores_are_in_build_order() -> None:
    index = Bm25Index.build(["mango", "lemon", "kiwi"])
    assert [int(np.argmax(index.scores(word))) for word in ("mango", "lemon", "kiwi")] == [0, 1, 2]


def test_out_of_vocabulary_query_scores_zero() -> None:
    index = Bm25Index.build(TOY)
    np.testing.assert_array_equal(index.scores("zeppelin"), np.zeros(3, dtype=np.float32))


def test_empty_and_stopword_only_query_scores_zero() -> None:
    index = Bm25Index.build(TOY)
    np.testing.assert_array_equal(index.scores(""), np.zeros(3))
    np.testing.assert_array_equal(index.scores("the and of"), np.zeros(3))


def test_partially_out_of_vocabulary_query_scores_the_known_terms() -> None:
    index = Bm25Index.build(TOY)
    np.testing.assert_allclose(index.scores("lemon zeppelin"), index.scores("lemon"))


def test_empty_index() -> None:
    index = Bm25Index.build([])
    assert index.size == 0
    scores = index.scores("lemon")
    assert scores.shape == (0,)


def test_empty_index_save_load_round_trip(tmp_path: Path) -> None:
    Bm25Index.build([]).save(tmp_path / "bm25")
    loaded = Bm25Index.load(tmp_path / "bm25")
    assert loaded.size == 0
    assert loaded.scores("lemon").shape == (0,)


def test_save_load_round_trip_gives_identical_scores(tmp_path: Path) -> None:
    texts = TOY + ["class QueueWorker: retries tasks", "storage backend for the queue"]
    index = Bm25Index.build(texts)
    index.save(tmp_path / "bm25")
    loaded = Bm25Index.load(tmp_path / "bm25")
    assert loaded.size == len(texts)
    for query in ["lemon", "kiwi mango", "queue worker retry", "zeppelin", ""]:
        np.testing.assert_array_equal(loaded.scores(query), index.scores(query))


def test_a_saved_index_looks_terms_up_in_its_sorted_files_as_in_bm25s_vocabulary(tmp_path: Path) -> None:
    """Each term of bm25s's JSON vocabulary (and none else) is found with its id by bisection of the sorted files, which
    a loaded index reads instead of parsing the JSON; a version without them still reads the JSON."""
    from ctxrag.storage.bm25 import TERM_IDS_FILE, SortedTerms

    texts = [*TOY, "class QueueWorker: retries tasks", "naïve café résumé 東京 queue", "storage backend for the queue"]
    index = Bm25Index.build(texts)
    index.save(tmp_path / "bm25")
    vocab = json.loads((tmp_path / "bm25" / "vocab.index.json").read_text(encoding="utf-8"))
    terms = SortedTerms(tmp_path / "bm25")
    assert all(terms.get(term) == number for term, number in vocab.items()) and len(vocab) > 10
    assert terms.get("zeppelin") is None and terms.get("lemo") is None and terms.get("lemonz") is None
    assert isinstance(Bm25Index.load(tmp_path / "bm25").postings.vocab, SortedTerms)  # type: ignore[union-attr]
    (tmp_path / "bm25" / TERM_IDS_FILE).unlink()
    older = Bm25Index.load(tmp_path / "bm25")
    assert isinstance(older.postings.vocab, dict)  # type: ignore[union-attr]
    for query in ["queue worker", "café 東京", "zeppelin"]:
        np.testing.assert_array_equal(older.scores(query), index.scores(query))


def test_a_loaded_index_reads_its_files_through_plain_arrays_over_the_mapping(tmp_path: Path) -> None:
    """The postings and the sorted terms stay memory-mapped (no copy), but are indexed as plain arrays: np.memmap's own
    indexing made a memmap object at each step of a term's bisection (evaluate's searches, issue 51)."""
    Bm25Index.build([*TOY, "class QueueWorker: retries tasks"]).save(tmp_path / "bm25")
    postings = Bm25Index.load(tmp_path / "bm25").postings
    assert postings is not None
    terms = postings.vocab
    assert not isinstance(terms, dict)
    for array in (postings.data, postings.indices, postings.indptr, terms._terms, terms._offsets, terms._ids):
        assert type(array) is np.ndarray and isinstance(array.base, np.memmap)  # a view of the map, not a copy


def _idf(n_docs: int, doc_freq: int) -> float:
    return math.log(1 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def _tf_part(tf: int, dl: int, avgdl: float, k1: float = 1.2, b: float = 0.75) -> float:
    """bm25s's "lucene" term-frequency part: tf / (tf + k1 * (1 - b + b * dl / avgdl)) (no (k1 + 1) factor)."""
    return tf / (tf + k1 * (1 - b + b * dl / avgdl))


def test_score_matches_hand_computed_lucene_bm25() -> None:
    # N = 3 documents of lengths 2, 3, 4 -> avgdl = 9 / 3 = 3.
    # "lemon" is in documents 0 (tf 1) and 1 (tf 2): n = 2 -> idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6)
    # doc 0: tf part = 1 / (1 + 1.2 * (0.25 + 0.75 * 2 / 3)) = 1 / (1 + 1.2 * 0.75) = 1 / 1.9
    # doc 1: tf part = 2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 3)) = 2 / (2 + 1.2) = 2 / 3.2
    index = Bm25Index.build(TOY)
    scores = index.scores("lemon")
    idf = math.log(1.6)
    assert _idf(3, 2) == pytest.approx(idf)
    assert _tf_part(1, 2, 3.0) == pytest.approx(1 / 1.9)
    assert _tf_part(2, 3, 3.0) == pytest.approx(2 / 3.2)
    np.testing.assert_allclose(scores, [idf / 1.9, idf * 2 / 3.2, 0.0], rtol=1e-6)
    assert scores[0] == pytest.approx(0.24737033, rel=1e-6)


def test_score_is_the_textbook_formula_without_the_k1_plus_1_factor() -> None:
    # The textbook/old-Lucene tf part is tf * (k1 + 1) / (tf + k1 * (...)); bm25s's "lucene" method (like Lucene >= 8)
    # drops the constant (k1 + 1) = 2.2 factor. Every score is scaled by the same constant, so rankings are identical.
    index = Bm25Index.build(TOY)
    textbook = _idf(3, 2) * 1 * (1.2 + 1) / (1 + 1.2 * (1 - 0.75 + 0.75 * 2 / 3))
    assert index.scores("lemon")[0] * 2.2 == pytest.approx(textbook, rel=1e-6)


def test_multi_term_query_sums_term_scores() -> None:
    # "kiwi": n = 2 (docs 0, 2), idf = ln(1.6). doc 2 (dl 4): 1 / (1 + 1.2 * (0.25 + 0.75 * 4 / 3)) = 1 / 2.5
    # "mango": n = 2 (docs 1, 2), idf = ln(1.6). doc 2: 1 / 2.5 as well -> doc 2 = 2 * ln(1.6) / 2.5
    index = Bm25Index.build(TOY)
    scores = index.scores("kiwi mango")
    assert scores[2] == pytest.approx(2 * math.log(1.6) / 2.5, rel=1e-6)
    np.testing.assert_allclose(scores, index.scores("kiwi") + index.scores("mango"), rtol=1e-6)


def test_custom_parameters_change_scores() -> None:
    # b = 0: no length normalisation -> doc 0 tf part = 1 / (1 + 1.2) for "lemon"
    index = Bm25Index.build(TOY, k1=1.2, b=0.0)
    assert index.scores("lemon")[0] == pytest.approx(math.log(1.6) / 2.2, rel=1e-6)


def test_rarer_term_has_higher_idf() -> None:
    # "grape" is in one document (idf ln(1 + 2.5 / 1.5)), "kiwi" in two (ln 1.6): same doc 2, same tf and dl.
    index = Bm25Index.build(TOY)
    assert index.scores("grape")[2] > index.scores("kiwi")[2]
    assert index.scores("grape")[2] == pytest.approx(math.log(1 + 2.5 / 1.5) / 2.5, rel=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_corpus_without_any_token_builds_and_scores_zero() -> None:
    index = Bm25Index.build(["the and", "... --- !!!"])
    assert index.size == 2
    np.testing.assert_array_equal(index.scores("the lemon"), np.zeros(2))


def test_document_without_tokens_beside_others_scores_zero() -> None:
    index = Bm25Index.build(["the and", "lemon"])
    scores = index.scores("lemon")
    assert not np.isnan(scores).any()
    assert scores[0] == 0 and scores[1] > 0


def _texts_and_queries() -> tuple[list[str], list[str]]:
    """The cookbook's 737 chunks and 248 questions where ../shared/data is present, else the sample's paragraphs and
    questions (in the repository)."""
    codebase = SHARED_DATA / "codebase"
    if (codebase / "codebase_chunks.json").exists():
        chunks = json.loads((codebase / "codebase_chunks.json").read_text())
        texts = [chunk["content"] for document in chunks for chunk in document["chunks"]]
        lines = (codebase / "evaluation_set.jsonl").read_text().splitlines()
    else:
        texts = [
            part
            for path in sorted(SAMPLE_CORPUS.rglob("*.*"))
            for part in path.read_text().split("\n\n")
            if part.strip()
        ]
        lines = SAMPLE_QUESTIONS.read_text().splitlines()
    return texts, [json.loads(line)["query"] for line in lines if line.strip()]


def test_postings_read_back_score_as_bm25s_does_to_the_last_bit(tmp_path: Path) -> None:
    """A search reads bm25s's saved files itself; every question scores exactly as bm25s's own loaded index scores it."""
    import bm25s

    texts, queries = _texts_and_queries()
    Bm25Index.build(texts).save(tmp_path / "bm25")
    ours, theirs = Postings.read(tmp_path / "bm25"), bm25s.BM25.load(str(tmp_path / "bm25"), show_progress=False)
    assert len(queries) >= 10
    for query in queries + ["retry retry retry", "zeppelin"]:
        ids = theirs.get_tokens_ids(tokenize(query))
        expected = theirs.get_scores(ids) if ids else np.zeros(len(texts), dtype=np.float32)
        np.testing.assert_array_equal(ours.scores(tokenize(query), len(texts)), expected, err_msg=query)


def test_an_index_of_another_bm25_method_is_refused_by_name(tmp_path: Path) -> None:
    Bm25Index.build(TOY).save(tmp_path / "bm25")
    params = json.loads((tmp_path / "bm25" / "params.index.json").read_text())
    (tmp_path / "bm25" / "params.index.json").write_text(json.dumps({**params, "method": "bm25+"}))
    with pytest.raises(CorruptIndexError, match=r"bm25\+"):
        Bm25Index.load(tmp_path / "bm25")

"""The Cohere rerank simulator (test equipment) against the real ``cohere`` SDK ``ClientV2``."""

from __future__ import annotations

from collections.abc import Iterator

import cohere
import pytest
import requests
from cohere.errors import BadRequestError, InternalServerError, TooManyRequestsError, UnauthorizedError

from tests.equipment.cohere_simulator import MAX_DOCUMENTS, CohereSimulator

DOCS = [
    "Paris is the capital of France.",
    "The capital of the United States is Washington, D.C.",
    "Bananas are rich in potassium.",
    "Washington state grows apples.",
]
QUERY = "What is the capital of the United States?"


@pytest.fixture(scope="module")
def sim() -> Iterator[CohereSimulator]:
    with CohereSimulator() as s:
        yield s


@pytest.fixture
def client(sim: CohereSimulator) -> Iterator[cohere.ClientV2]:
    sim.reset()
    with cohere.ClientV2(api_key="test", base_url=sim.url, max_retries=0) as c:
        yield c


def test_url_has_no_path(sim: CohereSimulator) -> None:
    assert sim.url.startswith("http://127.0.0.1:") and sim.url.count("/") == 2


def test_rerank_order_scores_and_request_shape(sim: CohereSimulator, client: cohere.ClientV2) -> None:
    response = client.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS)
    indices = [r.index for r in response.results]
    assert indices[0] == 1 and sorted(indices) == [0, 1, 2, 3]
    scores = [r.relevance_score for r in response.results]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    assert response.id and response.meta.api_version.version == "2"
    (req,) = sim.requests
    assert (req.method, req.path, req.status) == ("POST", "/v2/rerank", 200)
    assert req.headers["authorization"] == "Bearer test"
    # Unset optional parameters are omitted by the SDK (not sent as null); no return_documents in v2.
    assert req.json == {"model": "rerank-v3.5", "query": QUERY, "documents": DOCS}


def test_top_n_truncates_and_is_deterministic(sim: CohereSimulator, client: cohere.ClientV2) -> None:
    first = client.rerank(model="rerank-english-v3.0", query=QUERY, documents=DOCS, top_n=2)
    again = client.rerank(model="rerank-english-v3.0", query=QUERY, documents=DOCS, top_n=2)
    assert len(first.results) == 2
    assert [(r.index, r.relevance_score) for r in first.results] == [
        (r.index, r.relevance_score) for r in again.results
    ]
    assert sim.requests[0].json["top_n"] == 2


def test_ties_break_towards_earlier_documents(client: cohere.ClientV2) -> None:
    response = client.rerank(model="rerank-v3.5", query="zebra", documents=["a", "b", "c"])
    assert [r.index for r in response.results] == [0, 1, 2]


def test_billed_search_units(client: cohere.ClientV2) -> None:
    def units(documents: list[str], **kwargs: int) -> float:
        return client.rerank(
            model="rerank-v3.5", query="q", documents=documents, **kwargs
        ).meta.billed_units.search_units

    assert units(["short"] * 100) == 1
    assert units(["short"] * 101) == 2
    long_doc = "x" * 4_000  # 1,000 simulated tokens (+1 for the query) -> 3 chunks of 500
    assert units([long_doc] * 34) == 2  # 102 chunks
    assert units([long_doc] * 34, max_tokens_per_doc=100) == 1  # truncated first: 1 chunk each


def test_too_many_documents_is_bad_request(client: cohere.ClientV2) -> None:
    with pytest.raises(BadRequestError) as info:
        client.rerank(model="rerank-v3.5", query="q", documents=["d"] * (MAX_DOCUMENTS + 1))
    assert info.value.status_code == 400
    assert "too many documents" in info.value.body["message"]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"query": "", "documents": DOCS, "model": "rerank-v3.5"}, "query must not be empty"),
        ({"query": QUERY, "documents": [], "model": "rerank-v3.5"}, "documents must be a non-empty list"),
        ({"query": QUERY, "documents": DOCS, "model": "embed-english-v3.0"}, "not found"),
        ({"query": QUERY, "documents": DOCS, "model": "rerank-v3.5", "top_n": 0}, "top_n"),
    ],
)
def test_bad_requests_carry_message(client: cohere.ClientV2, kwargs: dict, fragment: str) -> None:
    with pytest.raises(BadRequestError) as info:
        client.rerank(**kwargs)
    assert fragment in info.value.body["message"]


def test_missing_key_is_401(sim: CohereSimulator) -> None:
    r = requests.post(
        f"{sim.url}/v2/rerank", json={"model": "rerank-v3.5", "query": "q", "documents": ["d"]}, timeout=5
    )
    assert r.status_code == 401 and r.json()["message"] == "invalid api token"
    with cohere.ClientV2(api_key="", base_url=sim.url, max_retries=0) as bad:
        with pytest.raises(UnauthorizedError):
            bad.rerank(model="rerank-v3.5", query="q", documents=["d"])


def test_429_is_too_many_requests_with_retry_after(sim: CohereSimulator, client: cohere.ClientV2) -> None:
    sim.fail_next(429, retry_after=3)
    with pytest.raises(TooManyRequestsError) as info:
        client.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS)
    err = info.value
    assert err.status_code == 429
    assert err.headers["retry-after"] == "3"  # plain dict, lowercase keys
    assert err.body["message"].startswith("Rate limit exceeded")
    assert len(client.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS).results) == 4
    assert [r.status for r in sim.requests] == [429, 200]


def test_500_is_internal_server_error(sim: CohereSimulator, client: cohere.ClientV2) -> None:
    sim.fail_next(500)
    with pytest.raises(InternalServerError):
        client.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS)


def test_default_client_retries_and_honours_retry_after(sim: CohereSimulator, monkeypatch: pytest.MonkeyPatch) -> None:
    # ClientV2 defaults to max_retries=2 on 429/408/409/5xx and sleeps retry-after seconds
    # (integer or HTTP date; retry-after-ms also honoured; capped at 60 s). Record it, wait 0.
    import cohere.core.http_client as http_client

    waits: list[float] = []
    original = http_client._retry_timeout
    monkeypatch.setattr(http_client, "_retry_timeout", lambda **kw: waits.append(original(**kw)) or 0.0)
    sim.reset()
    sim.fail_next(429, count=2, retry_after=3)
    with cohere.ClientV2(api_key="test", base_url=sim.url) as default_client:
        assert len(default_client.rerank(model="rerank-v3.5", query=QUERY, documents=DOCS).results) == 4
    assert waits == [3.0, 3.0]
    assert [r.status for r in sim.requests] == [429, 429, 200]

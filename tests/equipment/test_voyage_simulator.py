"""The Voyage simulator (test equipment) against the real ``voyageai`` SDK client."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import numpy as np
import pytest
import requests
import voyageai
import voyageai.error

from tests.equipment.voyage_simulator import MAX_INPUTS, VoyageSimulator, simulated_tokens


@pytest.fixture(scope="module")
def sim() -> Iterator[VoyageSimulator]:
    with VoyageSimulator() as s:
        yield s


@pytest.fixture
def client(sim: VoyageSimulator) -> voyageai.Client:
    sim.reset()
    return voyageai.Client(api_key="test-key", base_url=sim.url, max_retries=0)


def _cos(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def test_url_is_the_sdk_base_url_with_v1(sim: VoyageSimulator) -> None:
    assert sim.url.startswith("http://127.0.0.1:") and sim.url.endswith("/v1")


def test_embed_count_dimension_and_default_base64_request(sim: VoyageSimulator, client: voyageai.Client) -> None:
    texts = ["the cat sat on the mat", "a dog in the park", "quarterly revenue grew"]
    result = client.embed(texts, model="voyage-3.5", input_type="document")
    assert len(result.embeddings) == 3
    assert all(len(v) == 1024 for v in result.embeddings)
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-4 for v in result.embeddings)
    assert result.total_tokens == sum(simulated_tokens(t) for t in texts)
    (req,) = sim.requests
    assert (req.method, req.path, req.status) == ("POST", "/v1/embeddings", 200)
    assert req.headers["authorization"] == "Bearer test-key"
    # The SDK always asks for base64 unless told otherwise, and decodes float32 itself.
    assert req.json["encoding_format"] == "base64"
    assert req.json["input"] == texts and req.json["truncation"] is True
    assert req.json["output_dimension"] is None and req.json["output_dtype"] is None


def test_deterministic_and_word_overlap_is_closer(client: voyageai.Client) -> None:
    a, b, c = client.embed(
        ["solar panel efficiency", "solar panel cost", "medieval castle architecture"], model="voyage-3"
    ).embeddings
    again = client.embed(["solar panel efficiency"], model="voyage-3").embeddings[0]
    assert np.allclose(a, again)
    assert _cos(a, b) > _cos(a, c) + 0.2


def test_query_and_document_vectors_differ(client: voyageai.Client) -> None:
    q = client.embed(["refund policy"], model="voyage-3.5", input_type="query").embeddings[0]
    d = client.embed(["refund policy"], model="voyage-3.5", input_type="document").embeddings[0]
    assert not np.allclose(q, d)
    assert _cos(q, d) > 0.8


def test_plain_json_floats_match_base64(sim: VoyageSimulator) -> None:
    body = {"input": "hello world", "model": "voyage-3.5", "input_type": None}
    headers = {"Authorization": "Bearer k"}
    plain = requests.post(f"{sim.url}/embeddings", json=body, headers=headers, timeout=5).json()
    b64 = requests.post(f"{sim.url}/embeddings", json={**body, "encoding_format": "base64"}, headers=headers, timeout=5)
    assert plain["object"] == "list" and plain["model"] == "voyage-3.5"
    assert plain["data"][0]["object"] == "embedding" and plain["data"][0]["index"] == 0
    decoded = np.frombuffer(base64.b64decode(b64.json()["data"][0]["embedding"]), "<f4")
    assert np.allclose(decoded, plain["data"][0]["embedding"])


def test_missing_key_is_401(sim: VoyageSimulator) -> None:
    r = requests.post(f"{sim.url}/embeddings", json={"input": "x", "model": "voyage-3"}, timeout=5)
    assert r.status_code == 401 and "detail" in r.json()


def test_too_many_inputs_is_invalid_request(client: voyageai.Client) -> None:
    with pytest.raises(voyageai.error.InvalidRequestError) as info:
        client.embed(["x"] * (MAX_INPUTS + 1), model="voyage-3.5")
    assert info.value.http_status == 400
    assert "batch size limit is 1000" in str(info.value)
    assert info.value.json_body["detail"] == str(info.value)


def test_token_limit_per_model(client: voyageai.Client) -> None:
    texts = ["word " * 12_000] * 10  # 60,000 bytes -> 15,000 simulated tokens each, 150,000 in all
    with pytest.raises(voyageai.error.InvalidRequestError, match="max allowed tokens per submitted batch is 120000"):
        client.embed(texts, model="voyage-3-large")
    assert len(client.embed(texts, model="voyage-3.5", output_dimension=256).embeddings) == 10  # 320K limit


def test_truncation_false_rejects_over_context_length(client: voyageai.Client) -> None:
    long_text = "abcd" * 5_000  # 5,000 simulated tokens > voyage-2's 4,000 context
    assert client.embed([long_text], model="voyage-2").total_tokens == 4_000
    with pytest.raises(voyageai.error.InvalidRequestError, match="context length"):
        client.embed([long_text], model="voyage-2", truncation=False)


def test_output_dimension_rules(client: voyageai.Client) -> None:
    for model in ("voyage-3.5", "voyage-3.5-lite", "voyage-3-large", "voyage-code-3"):
        for dim in (256, 2048):
            assert len(client.embed(["x y"], model=model, output_dimension=dim).embeddings[0]) == dim
    with pytest.raises(voyageai.error.InvalidRequestError, match="does not support the `output_dimension`"):
        client.embed(["x"], model="voyage-2", output_dimension=256)
    with pytest.raises(voyageai.error.InvalidRequestError, match="must be one of"):
        client.embed(["x"], model="voyage-3.5", output_dimension=300)
    small = client.embed(["alpha beta"], model="voyage-3.5", output_dimension=256).embeddings[0]
    full = client.embed(["alpha beta"], model="voyage-3.5", output_dimension=2048).embeddings[0]
    assert _cos(small, full[:256]) > 0.999  # Matryoshka: a prefix, renormalized


def test_quantized_dtype_decodes_through_sdk(client: voyageai.Client) -> None:
    vec = client.embed(["alpha beta"], model="voyage-3.5", output_dtype="int8").embeddings[0]
    assert len(vec) == 1024 and all(isinstance(x, int) and -128 <= x <= 127 for x in vec)
    bits = client.embed(["alpha beta"], model="voyage-3.5", output_dtype="ubinary").embeddings[0]
    assert len(bits) == 128


def test_unknown_model_is_400(client: voyageai.Client) -> None:
    with pytest.raises(voyageai.error.InvalidRequestError, match="not supported"):
        client.embed(["x"], model="voyage-nonexistent")


def test_rate_limit_error_exposes_retry_after(sim: VoyageSimulator, client: voyageai.Client) -> None:
    sim.fail_next(429, retry_after=7)
    with pytest.raises(voyageai.error.RateLimitError) as info:
        client.embed(["x"], model="voyage-3.5")
    err = info.value
    assert err.http_status == 429
    assert err.headers["retry-after"] == "7" and err.headers["Retry-After"] == "7"
    assert str(err).startswith("Rate limit exceeded")
    assert len(client.embed(["x"], model="voyage-3.5").embeddings) == 1  # only the next request failed
    assert [r.status for r in sim.requests] == [429, 200]


def test_server_errors_map_to_sdk_classes(sim: VoyageSimulator, client: voyageai.Client) -> None:
    sim.fail_next(500)
    with pytest.raises(voyageai.error.ServerError):
        client.embed(["x"], model="voyage-3.5")
    sim.fail_next(503)
    with pytest.raises(voyageai.error.ServiceUnavailableError):
        client.embed(["x"], model="voyage-3.5")


def test_sdk_retries_429_when_max_retries_allows(sim: VoyageSimulator, monkeypatch: pytest.MonkeyPatch) -> None:
    # voyageai's tenacity loop: max_retries is the total number of attempts (0 and 1 both mean one);
    # it retries RateLimitError / ServiceUnavailableError / Timeout with jittered backoff from 1 s
    # and ignores retry-after. Drop the backoff so the test stays fast.
    import tenacity
    import voyageai.client as voyage_client

    monkeypatch.setattr(voyage_client, "wait_exponential_jitter", lambda **_: tenacity.wait_none())
    client = voyageai.Client(api_key="k", base_url=sim.url, max_retries=2)
    sim.reset()
    sim.fail_next(429, retry_after=0)
    assert len(client.embed(["x"], model="voyage-3.5").embeddings) == 1
    assert [r.status for r in sim.requests] == [429, 200]


def test_latency_and_reset() -> None:
    with VoyageSimulator(latency_seconds=0.05) as s:
        s.fail_next(500, count=3)
        s.reset()
        r = requests.post(
            f"{s.url}/embeddings",
            json={"input": "x", "model": "voyage-3"},
            headers={"Authorization": "Bearer k"},
            timeout=5,
        )
        assert r.status_code == 200 and len(s.requests) == 1

"""The plan checked against the run: each Claude mode planned (prompt tokens counted on the Anthropic simulator, test
equipment) and then run by the index flow on the same simulator; requests and tokens within 10% of the simulator's
request log and the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxrag.storage.ledger import Ledger
from ctxrag.tasks.context.claude.contextualizer import MODES, ClaudeSettings
from ctxrag.tasks.cost_plan import plan_costs
from tests.equipment.anthropic_simulator import AnthropicSimulator
from tests.helpers import run, write_corpus

pytestmark = pytest.mark.usefixtures("prefect_harness")
TOLERANCE = 0.10
TOKENS = ("input_tokens", "cache_write_tokens", "cache_read_tokens")


def simulator_requests(simulator: AnthropicSimulator, since: int) -> int:
    """Messages the simulator answered since ``since``: calls, or items of submitted batches."""
    count = 0
    for request in simulator.requests[since:]:
        if request.path == "/v1/messages" and request.status == 200:
            count += 1
        elif request.path == "/v1/messages/batches" and request.method == "POST" and request.status == 200:
            count += len(request.json["requests"])
    return count


def test_every_mode_runs_within_ten_percent_of_its_plan(
    anthropic_simulator: AnthropicSimulator, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus, big_docs=2, chunks_per_doc=25, words_per_chunk=200, small_chunks=3)
    context_tokens = None  # the output per context: measured on the first (per-chunk) run, then planned with
    for mode in MODES:
        home = tmp_path / mode
        anthropic_simulator.reset()  # each mode starts with an empty prompt cache, as a first run would
        plan = plan_costs(
            str(corpus),
            "paid",
            home,
            claude=ClaudeSettings(mode=mode),
            **({"context_tokens": context_tokens} if context_tokens else {}),
        )
        assert plan["token_counts"].startswith("counted")
        planned = plan["modes"][mode]
        since = len(anthropic_simulator.requests)  # after the plan's count_tokens calls
        spent = run(corpus, home, mode=mode)["contextualizer_calls"]
        rows = [row for row in Ledger(home).rows() if row["stage"] == "contextualize"]
        assert spent["failed_calls"] == 0 and len(rows) == spent["calls"]

        assert planned["requests"] == pytest.approx(simulator_requests(anthropic_simulator, since), rel=TOLERANCE), mode
        assert planned["requests"] == pytest.approx(spent["calls"], rel=TOLERANCE), mode
        for name in TOKENS:
            assert planned[name] == pytest.approx(spent[name], rel=TOLERANCE), (mode, name, planned[name], spent[name])
        if mode == "per-chunk":  # output is an assumption; the per-document modes' JSON overhead is checked against it
            context_tokens = round(spent["output_tokens"] / planned["chunks"])
        else:
            assert planned["output_tokens"] == pytest.approx(spent["output_tokens"], rel=TOLERANCE), mode
            assert planned["cost_usd"] == pytest.approx(spent["cost_usd"], rel=TOLERANCE), mode
        assert plan["documents_below_cache_minimum"] == spent["documents_without_caching"] == ["uuid-2"]

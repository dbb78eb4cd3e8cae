"""End-to-end evaluation (the RAG guide's): Claude answers from the retrieved chunks; Claude judges the answer.

A judgement without a parseable ``<is_correct>true|false</is_correct>`` is counted and reported, never guessed:
accuracy is computed over the parseable ones.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxrag.storage.ledger import LedgerRow
    from ctxrag.tasks.context.claude.client import ClaudeClient

ANSWER_PROMPT = """You have been tasked with helping us to answer the following query:
<query>
{query}
</query>
You have access to the following documents which are meant to provide context as you answer the query:
<documents>
{documents}
</documents>
Please remain faithful to the underlying context, and only deviate from it if you are 100% sure that you know the answer already.
Answer the question now, and avoid providing preamble such as 'Here is the answer', etc"""

JUDGE_PROMPT = """You are an AI assistant tasked with evaluating the correctness of answers to questions about {subject}.

Question: {query}

Correct Answer: {correct}

Generated Answer: {generated}

Is the Generated Answer correct based on the Correct Answer? You should pay attention to the substance of the answer, and ignore minute details that may differ.

Small differences or changes in wording don't matter. If the generated answer and correct answer are saying essentially the same thing then that generated answer should be marked correct.

However, if there is any critical piece of information which is missing from the generated answer in comparison to the correct answer, then we should mark this as incorrect.

Finally, if there are any direct contradictions between the correct answer and generated answer, we should deem the generated answer to be incorrect.

Respond in the following XML format:
<evaluation>
<content>
<explanation>Your explanation here</explanation>
<is_correct>true/false</is_correct>
</content>
</evaluation>"""

VERDICT = re.compile(r"<is_correct>\s*(true|false)\s*</is_correct>", re.I)


def parse_verdict(text: str) -> bool | None:
    """True/False from the judge's XML; None when it cannot be read."""
    found = VERDICT.findall(text)
    return found[-1].lower() == "true" if len(set(value.lower() for value in found)) == 1 else None


@dataclass
class EndToEnd:
    """Answers and judges with Claude; one ledger row per call."""

    answer_model: str = "claude-haiku-4-5"
    judge_model: str = "claude-sonnet-4-5"
    subject: str = "the indexed documents"
    ledger: Callable[[list[LedgerRow]], None] | None = None
    run_id: str = ""
    client: ClaudeClient | None = field(default=None, repr=False)

    def _ask(self, model: str, prompt: str, stage: str, max_tokens: int) -> str:
        from ctxrag.storage.ledger import LedgerRow
        from ctxrag.tasks.common.providers import Provider
        from ctxrag.tasks.context.claude.client import ClaudeClient, message_text
        from ctxrag.tasks.context.claude.pricing import Usage, charge

        if self.client is None:
            self.client = ClaudeClient()
        started = time.perf_counter()
        row = LedgerRow(self.run_id, stage, Provider.ANTHROPIC, model, f"{stage}-v1", stage, "", [], "ok")
        try:
            reply = self.client.create(
                model=model, max_tokens=max_tokens, messages=[{"role": "user", "content": prompt}]
            )
        except Exception as error:
            row.status, row.error, row.latency_s = "error", str(error), time.perf_counter() - started
            row.attempts = getattr(error, "attempts", 1)
            if self.ledger:
                self.ledger([row])
            raise
        row.latency_s, row.attempts = reply.latency_s, reply.attempts
        charge(row, model, Usage.from_api(reply.message.usage))
        if self.ledger:
            self.ledger([row])
        return message_text(reply.message)

    def answer(self, query: str, documents: list[str]) -> str:
        return self._ask(
            self.answer_model, ANSWER_PROMPT.format(query=query, documents="\n".join(documents)), "answer", 2500
        )

    def judge(self, query: str, generated: str, correct: str) -> bool | None:
        prompt = JUDGE_PROMPT.format(subject=self.subject, query=query, correct=correct, generated=generated)
        return parse_verdict(self._ask(self.judge_model, prompt, "judge", 1500))

"""Which contextualizer a run uses: its spec (plain values, safe as a Prefect task parameter) and the factory.

Above both families (ctxrag.tasks.context.offline's offline ones, ctxrag.tasks.context.claude's): neither imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxrag.tasks.context.claude.contextualizer import ClaudeContextualizer, ClaudeSettings, ClaudeSummarizer
from ctxrag.tasks.context.offline import Contextualizer, ContextualizerKind, NoContext, StructuralContextualizer


@dataclass(frozen=True)
class ContextualizerSpec:
    """Which contextualizer, with its settings: plain values, safe as a Prefect task parameter (no client, no key)."""

    kind: str = "structural"
    claude: ClaudeSettings | None = None

    def __post_init__(self) -> None:
        ContextualizerKind.from_str(self.kind)

    @property
    def paid(self) -> bool:
        return self.kind in {ContextualizerKind.CLAUDE.value, ContextualizerKind.CLAUDE_SUMMARY.value}

    def build(self, run_id: str = "") -> Contextualizer:
        return make_contextualizer(self.kind, self.claude, run_id)


def make_contextualizer(kind: str, claude: ClaudeSettings | None = None, run_id: str = "") -> Contextualizer:
    """The contextualizer for a CLI/config name (Claude ones are built lazily: no key is needed to plan)."""
    match ContextualizerKind.from_str(kind):
        case ContextualizerKind.STRUCTURAL:
            return StructuralContextualizer()
        case ContextualizerKind.NONE:
            return NoContext()
        case ContextualizerKind.CLAUDE:
            return ClaudeContextualizer(claude or ClaudeSettings(), run_id)
        case ContextualizerKind.CLAUDE_SUMMARY:
            return ClaudeSummarizer(claude or ClaudeSettings(), run_id)

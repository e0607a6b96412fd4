"""Dead-letter summaries: now :mod:`lowwater.metrics.dead_letters` (below the runtimes); re-exported here."""

from lowwater.metrics.dead_letters import (
    SAMPLE_CHARS,
    TOP_REASONS,
    describe_reasons,
    merge_reasons,
    reason_kind,
    summarize_dead,
)

__all__ = [
    "SAMPLE_CHARS",
    "TOP_REASONS",
    "describe_reasons",
    "merge_reasons",
    "reason_kind",
    "summarize_dead",
]

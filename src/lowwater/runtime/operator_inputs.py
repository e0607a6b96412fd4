"""Combining an operator's inputs once per batch end (Flink's two-input operators).

Each input (a :class:`~lowwater.runtime.union_input.UnionInput`) reports, per batch end,
what reached it: ``ACTIVE`` if it was idle, its watermark if that rose, ``IDLE`` if it
ends the batch idle. The operator keeps one
:class:`~lowwater.core.watermarks.PartialWatermark` per input in a
:class:`~lowwater.core.watermarks.CombinedWatermarkStatus` (Flink's
``AbstractStreamOperator`` with ``IndexedCombinedWatermarkStatus``): the minimum over the
active inputs, the maximum when all are idle, never back. An input that becomes active
again counts at once, so the watermark stays where it is until that input catches up.

The inputs' new states are combined once. Only an input that sends a watermark and then
``IDLE`` can make the operator move in two steps (the watermark is seen while that input
is still active); then the two inputs are taken in the order with fewer steps (ties:
input order). Every step's watermark reaches the operator in turn.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from lowwater.core.watermarks import CombinedWatermarkStatus, PartialWatermark, WatermarkEvent
from lowwater.runtime.exchange import ExchangeResult

__all__ = ["InputSteps", "combine_input_steps"]


@dataclass(frozen=True)
class InputSteps:
    steps: tuple[int, ...]
    """The watermarks the operator moves to, in order (empty: it does not move)."""
    idle: bool
    """Every input is idle after the batch end."""


def _events(r: ExchangeResult) -> list[WatermarkEvent]:
    events: list[WatermarkEvent] = []
    if r.became_active:
        events.append(WatermarkEvent.active())
    if r.advanced_to is not None:
        events.append(WatermarkEvent.watermark(r.advanced_to))
    if r.idle:
        events.append(WatermarkEvent.idle())
    return events


def _run(status: CombinedWatermarkStatus, partials: Sequence[PartialWatermark],
         events: list[list[WatermarkEvent]], order: Sequence[int]) -> list[int]:
    steps: list[int] = []
    for i in order:
        previous = ""
        for kind, ts in ((e.kind, e.timestamp) for e in events[i]):
            if kind == "idle" and previous == "watermark" and status.update_combined_watermark():
                steps.append(status.combined_watermark)  # the watermark was seen while still active
            if kind == "active":
                partials[i].idle = False
            elif kind == "watermark":
                partials[i].set_watermark(ts)
            else:
                partials[i].idle = True
            previous = kind
    if status.update_combined_watermark():
        steps.append(status.combined_watermark)
    return steps


def combine_input_steps(status: CombinedWatermarkStatus, partials: Sequence[PartialWatermark],
                        results: Sequence[ExchangeResult]) -> InputSteps:
    """Apply every input's batch-end events to ``partials`` and combine (see the module)."""
    events = [_events(r) for r in results]
    orders = [list(range(len(results)))]
    two_step = any(len(evs) >= 2 and evs[-2].kind == "watermark" and evs[-1].kind == "idle" for evs in events)
    if two_step and len(results) == 2:
        orders.append([1, 0])
    best: tuple[list[int], CombinedWatermarkStatus, list[PartialWatermark]] | None = None
    for order in orders:
        s, ps = copy.deepcopy((status, list(partials)))
        steps = _run(s, ps, events, order)
        if best is None or len(steps) < len(best[0]):
            best = (steps, s, ps)
    assert best is not None
    steps, s, ps = best
    for real, new in zip(partials, ps, strict=True):
        real.watermark, real.idle = new.watermark, new.idle
    status.combined_watermark, status.idle = s.combined_watermark, s.idle
    return InputSteps(tuple(steps), s.idle)

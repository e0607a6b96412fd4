"""CPU per element of the session window operator alone (no Spark), generic against the session one.

    .venv/bin/python benchmarks/session_operator_cpu.py [--operator generic|session|both] [--profile]

40,000 elements of 4,000 keys in three batches of 10 s of event time (random timestamps within
the batch), event-time sessions with a 3 s gap, sum; after each batch the watermark moves to
2 s before the batch's end. Prints the CPU time per element of the operator's calls (the
elements are made before), in microseconds: the operator's share of the keyed path's stage B,
not a Spark measurement.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import time
from typing import Any

from lowwater.core.clock import ManualClock
from lowwater.core.windows import AggregatingContents, EventTimeSessionWindows, WindowOperator, builtin_aggregate
from lowwater.core.windows.session_operator import SessionWindowOperator

KEYS, ELEMENTS = 4_000, 40_000


def make(kind: str) -> Any:
    assigner, contents = EventTimeSessionWindows(3_000), AggregatingContents(builtin_aggregate("sum", "value"))
    if kind == "generic":
        return WindowOperator(assigner, contents, clock=ManualClock(0))
    return SessionWindowOperator(assigner, contents, clock=ManualClock(0))


def batches() -> list[list[tuple[str, dict[str, int], int]]]:
    rng = random.Random(1)
    return [[(f"k{rng.randrange(KEYS)}", {"value": 1}, b * 10_000 + rng.randrange(10_000))
             for _ in range(ELEMENTS // 3)] for b in range(3)]


def run(kind: str, elements: list[list[tuple[str, dict[str, int], int]]]) -> None:
    op = make(kind)
    for b, batch in enumerate(elements):
        for key, element, ts in batch:
            op.process_element(key, element, ts)
        op.advance_watermark((b + 1) * 10_000 - 2_000)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--operator", choices=["generic", "session", "both"], default="both")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for kind in (["generic", "session"] if args.operator == "both" else [args.operator]):
        best = min(_timed(kind) for _ in range(3))
        print(f"{kind}: {best / ELEMENTS * 1e6:.1f} us/element (CPU, best of 3)")
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(run, kind, batches())
            pstats.Stats(profile).sort_stats("tottime").print_stats(12)


def _timed(kind: str) -> float:
    elements = batches()
    start = time.process_time()
    run(kind, elements)
    return time.process_time() - start


if __name__ == "__main__":
    main()

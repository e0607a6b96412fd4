"""Invariants of several sources, on random timelines (Hypothesis).

Without idleness nothing re-activates, so the valve, the two-input combination and one
source's partitions must all agree: the minimum over every partition of every source.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lowwater.scenario import run_scenario

WM = {"kind": "bounded_out_of_orderness", "max_out_of_orderness_ms": 300}
event = st.tuples(st.sampled_from(["A", "B"]), st.integers(0, 1), st.sampled_from("xy"), st.integers(0, 20_000))
timelines = st.lists(st.lists(event, max_size=4), min_size=1, max_size=8)


def _batches(timeline: list[list[tuple[str, int, str, int]]], several: bool) -> list[list[dict[str, Any]]]:
    out = []
    for b in timeline:
        batch = []
        for i, (src, p, key, ts) in enumerate(b):
            e: dict[str, Any] = {"key": key, "ts": ts, "value": 1 << i}
            if several:
                e.update(source=src, partition=p)
            else:
                e.update(partition=(0 if src == "A" else 2) + p)
            batch.append(e)
        out.append(batch)
    return out


@settings(max_examples=40, deadline=None)
@given(timelines)
def test_without_idleness_a_union_of_sources_is_one_source_with_all_their_partitions(
    timeline: list[list[tuple[str, int, str, int]]],
) -> None:
    window = {"window": {"kind": "tumbling", "size_ms": 2000}, "allowed_lateness_ms": 500, "aggregate": "sum"}
    union = run_scenario({"sources": [{"name": "A", "partitions": 2, "watermark": WM},
                                      {"name": "B", "partitions": 2, "watermark": WM}],
                          "batches": _batches(timeline, True), **window})
    single = run_scenario({"partitions": 4, "watermark": WM, "batches": _batches(timeline, False), **window})
    assert union["batch_watermarks"] == single["batch_watermarks"]
    assert sorted(map(repr, union["results"])) == sorted(map(repr, single["results"]))
    assert sorted((e["key"], e["ts"], e["value"]) for e in union["late"]) == \
        sorted((e["key"], e["ts"], e["value"]) for e in single["late"])


@settings(max_examples=40, deadline=None)
@given(timelines)
def test_without_idleness_a_connected_operator_moves_with_the_union(
    timeline: list[list[tuple[str, int, str, int]]],
) -> None:
    sources = [{"name": "A", "partitions": 2, "watermark": WM}, {"name": "B", "partitions": 2, "watermark": WM}]
    union = run_scenario({"sources": sources, "batches": _batches(timeline, True),
                          "window": {"kind": "tumbling", "size_ms": 2000}, "aggregate": "sum"})
    connect = run_scenario({"sources": sources, "topology": "connect", "timer_delay_ms": 700,
                            "batches": _batches(timeline, True)})
    assert connect["batch_watermarks"] == union["batch_watermarks"]
    assert connect["watermarks"] == union["watermarks"]
    # every timer fires, at a watermark at or past it, by the end of input; once per registration at
    # most: one registered again while it is pending is the same timer, but one registered again
    # after it fired (behind the watermark) is a new one and fires at the next advance, as in Flink
    registrations = Counter((ts + 700, key) for b in timeline for (_, _, key, ts) in b)
    fired = Counter((t["timer"], t["key"]) for t in connect["timers"])
    assert set(fired) == set(registrations)
    assert all(n <= registrations[timer] for timer, n in fired.items()), (fired, registrations)
    assert all(t["current_watermark"] >= t["timer"] for t in connect["timers"])
    assert "multi_step_batch_ends" not in connect

"""With one event per micro-batch, the batch form of a scenario equals its per-event form.

SCENARIOS.md: in per-event form "each event is its own micro-batch"; so the same events
written as ``batches: [[e1], [e2], ...]`` must give the same results, late elements and
combined watermarks, whatever the generator, window, lateness and aggregate.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.scenario import run_scenario


@st.composite
def watermarks(draw: Any) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            [
                "bounded_out_of_orderness",
                "monotonous",
                "legacy_bounded",
                "legacy_ascending",
                "punctuated",
            ]
        )
    )
    wm: dict[str, Any] = {"kind": kind}
    if kind in ("bounded_out_of_orderness", "legacy_bounded"):
        wm["max_out_of_orderness_ms"] = draw(st.integers(0, 5_000))
    elif kind == "legacy_ascending":
        wm["violation_handler"] = draw(st.sampled_from(["ignore", "log"]))
    elif kind == "punctuated":
        wm["field"] = "mark"
    return wm


@st.composite
def windows(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["tumbling", "sliding", "session"]))
    if kind == "session":
        return {"kind": kind, "gap_ms": draw(st.integers(1, 5_000))}
    size = draw(st.integers(1, 10_000))
    if kind == "tumbling":
        return {
            "kind": kind,
            "size_ms": size,
            "offset_ms": draw(st.integers(-(size - 1), size - 1)),
        }
    slide = draw(st.integers(max(1, size // 5), size))
    return {
        "kind": kind,
        "size_ms": size,
        "slide_ms": slide,
        "offset_ms": draw(st.integers(0, slide - 1)),
    }


@st.composite
def scenarios(draw: Any) -> dict[str, Any]:
    partitions = draw(st.integers(1, 3))
    events = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.sampled_from(["a", "b"]),
                    "ts": st.integers(-2_000, 30_000),
                    "value": st.integers(-50, 50),
                    "partition": st.integers(0, partitions - 1),
                    "mark": st.booleans(),
                }
            ),
            max_size=14,
        )
    )
    return {
        "partitions": partitions,
        "events": events,
        "watermark": draw(watermarks()),
        "window": draw(windows()),
        "allowed_lateness_ms": draw(st.integers(0, 5_000)),
        "aggregate": draw(st.sampled_from(["sum", "count", "min", "max"])),
        "final_watermark": draw(st.booleans()),
    }


def _comparable(doc: dict[str, Any]) -> tuple[Counter[Any], Counter[Any], list[int]]:
    results = Counter(
        (r["key"], r["window_start"], r["window_end"], r["value"], r["fire_index"])
        for r in doc["results"]
    )
    late = Counter((r["key"], r["ts"], r["value"], r["partition"]) for r in doc["late"])
    return results, late, [w["watermark"] for w in doc["watermarks"]]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_one_event_per_batch_equals_the_per_event_form(scenario: dict[str, Any]) -> None:
    per_event = run_scenario(scenario)
    batch_form = {k: v for k, v in scenario.items() if k != "events"}
    batch_form["batches"] = [[e] for e in scenario["events"]]
    batched = run_scenario(batch_form)
    assert "error" not in per_event and "error" not in batched
    assert _comparable(batched) == _comparable(per_event)
    # and batch_watermarks is the combined watermark in force after each batch
    assert len(batched["batch_watermarks"]) == len(scenario["events"])
    in_force = batched["batch_watermarks"]
    assert all(a <= b for a, b in pairwise(in_force))
    emitted = [w["watermark"] for w in batched["watermarks"] if w["watermark"] != MAX_TIMESTAMP]
    assert [w for w in dict.fromkeys(in_force) if w != MIN_TIMESTAMP] == emitted

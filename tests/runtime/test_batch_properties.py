"""Invariants of the batch form with idleness, processing-time clocks and several partitions.

* The combined watermark in force after each batch never goes back (DESIGN §1).
* Without allowed lateness and with the end-of-input watermark, every element of a
  tumbling or session window is counted in exactly one firing or reported late:
  ``sum(count results) + len(late) == len(events)``.
"""

from __future__ import annotations

from itertools import accumulate, pairwise
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lowwater.scenario import run_scenario

event = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["a", "b", "c"]),
        "ts": st.integers(0, 40_000),
        "value": st.integers(0, 9),
        "partition": st.integers(0, 2),
    }
)


@st.composite
def batch_scenarios(draw: Any) -> dict[str, Any]:
    batches = draw(st.lists(st.lists(event, max_size=5), min_size=1, max_size=10))
    steps = draw(st.lists(st.integers(0, 3_000), min_size=len(batches), max_size=len(batches)))
    kind = draw(st.sampled_from(["bounded_out_of_orderness", "time_lag"]))
    watermark: dict[str, Any] = {"kind": kind}
    if kind == "time_lag":
        watermark["lag_ms"] = draw(st.integers(0, 5_000))
    else:
        watermark["max_out_of_orderness_ms"] = draw(st.integers(0, 3_000))
    if draw(st.booleans()):
        watermark["idleness_ms"] = draw(st.integers(1, 4_000))
    window = draw(
        st.sampled_from(
            [
                {"kind": "tumbling", "size_ms": 5_000},
                {"kind": "tumbling", "size_ms": 3_000, "offset_ms": 1_000},
                {"kind": "session", "gap_ms": 2_000},
            ]
        )
    )
    return {
        "partitions": 3,
        "batches": batches,
        "processing_time_ms": list(accumulate(steps)),
        "watermark": watermark,
        "window": window,
        "allowed_lateness_ms": 0,
        "aggregate": "count",
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_scenarios())
def test_batch_watermarks_never_regress_with_idleness_and_clocks(scenario: dict[str, Any]) -> None:
    doc = run_scenario(scenario)
    assert "error" not in doc
    in_force = doc["batch_watermarks"]
    assert len(in_force) == len(scenario["batches"])
    assert all(a <= b for a, b in pairwise(in_force))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_scenarios())
def test_every_element_is_counted_once_or_reported_late(scenario: dict[str, Any]) -> None:
    doc = run_scenario(scenario)
    events = [e for b in scenario["batches"] for e in b]
    assert all(r["fire_index"] == 0 for r in doc["results"])
    assert sum(r["value"] for r in doc["results"]) + len(doc["late"]) == len(events)

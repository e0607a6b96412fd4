"""Several sources on the reference runtime (shared/SCENARIOS.md "Several sources").

Both topologies over the same timeline: two sources, bound 0 (``wm = ts - 1``), idleness
1000 ms, tumbling 5 s windows for ``union``::

    batch  t     A (clicks)      B (orders)
    0      0     a@1000          b@1000          both 999
    1      100   a@5000          -               B's idleness timer starts
    2      1200  a@9000          -               B idle (1100 > 1000)
    3      1300  a@9500          b@3000          B back at 2999, behind 8999
    4      1400  -               b@12000         B at 11999: caught up
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from lowwater.api import (
    CollectionSource,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    OutputTag,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
)
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.runtime.reference import ReferenceRuntime
from lowwater.scenario import ScenarioError, run_scenario

WM = {"kind": "bounded_out_of_orderness", "max_out_of_orderness_ms": 0, "idleness_ms": 1000}


def _ev(source: str, key: str, ts: int, value: int = 1) -> dict[str, Any]:
    return {"source": source, "key": key, "ts": ts, "value": value}


RETURNING = {
    "sources": [{"name": "A", "watermark": WM}, {"name": "B", "watermark": WM}],
    "batches": [
        [_ev("A", "a", 1000, 1), _ev("B", "b", 1000, 2)],
        [_ev("A", "a", 5000, 4)],
        [_ev("A", "a", 9000, 8)],
        [_ev("A", "a", 9500, 32), _ev("B", "b", 3000, 16)],
        [_ev("B", "b", 12000, 64)],
    ],
    "processing_time_ms": [0, 100, 1200, 1300, 1400],
}


def test_a_source_returning_to_a_union_does_not_hold_it_back_until_it_catches_up() -> None:
    doc = run_scenario({**RETURNING, "topology": "union", "window": {"kind": "tumbling", "size_ms": 5000},
                        "aggregate": "sum"})
    # batch 3: B is back at 2999 but unaligned, so the union follows A alone (9499)
    assert doc["batch_watermarks"] == [999, 999, 8999, 9499, 9499]
    assert doc["late"] == [{"key": "b", "ts": 3000, "value": 16, "partition": 0, "source": "B"}]


def test_an_input_returning_to_a_connected_operator_counts_at_once_and_holds_it_until_it_catches_up() -> None:
    doc = run_scenario({**RETURNING, "topology": "connect"})
    # batch 3: B counts at once at 2999, so the operator stays at 8999; batch 4: min(9499, 11999)
    assert doc["batch_watermarks"] == [999, 999, 8999, 8999, 9499]
    assert [(e["source"], e["ts"], e["current_watermark"]) for e in doc["elements"]] == [
        ("A", 1000, MIN_TIMESTAMP), ("B", 1000, MIN_TIMESTAMP), ("A", 5000, 999), ("A", 9000, 999),
        ("A", 9500, 8999), ("B", 3000, 8999), ("B", 12000, 8999),
    ]


def test_elements_of_one_batch_reach_the_operator_in_arrival_order_across_sources() -> None:
    batches = [[_ev("B", "k", 10), _ev("A", "k", 20), _ev("B", "k", 30), _ev("A", "k", 40)]]
    doc = run_scenario({"sources": [{"name": "A", "watermark": {"kind": "monotonous"}},
                                    {"name": "B", "watermark": {"kind": "monotonous"}}],
                        "topology": "connect", "batches": batches})
    assert [(e["source"], e["ts"]) for e in doc["elements"]] == [("B", 10), ("A", 20), ("B", 30), ("A", 40)]


def test_when_every_source_of_a_union_goes_idle_it_moves_to_the_maximum() -> None:
    doc = run_scenario({
        "sources": [{"name": "A", "watermark": WM}, {"name": "B", "watermark": WM}],
        "batches": [[_ev("A", "a", 10_000), _ev("B", "b", 5_000)], [], [], []],
        "processing_time_ms": [0, 100, 1000, 1200],
        "window": {"kind": "tumbling", "size_ms": 5000}, "aggregate": "sum", "final_watermark": False,
    })
    # both idle at t=1200 in the same batch end: B (4999) held the union, so the maximum is flushed
    assert doc["batch_watermarks"] == [4999, 4999, 4999, 9999]
    assert Counter((r["key"], r["window_start"]) for r in doc["results"]) == Counter({("b", 5000): 1})


def test_at_the_end_of_input_lowwater_sends_max_even_when_every_source_is_idle() -> None:
    doc = run_scenario({
        "sources": [{"name": "A", "watermark": WM}, {"name": "B", "watermark": WM}],
        "batches": [[_ev("A", "a", 10_000), _ev("B", "b", 5_000)], [], [], []],
        "processing_time_ms": [0, 100, 1000, 1200],
        "window": {"kind": "tumbling", "size_ms": 5000}, "aggregate": "sum",
    })
    assert doc["watermarks"][-1] == {"watermark": MAX_TIMESTAMP}  # Flink 2.3 drops it here
    assert ("a", 10_000) in {(r["key"], r["window_start"]) for r in doc["results"]}


def test_a_connected_input_that_sends_a_watermark_then_idle_moves_the_operator_in_two_steps() -> None:
    """A has two partitions: p0 idle at 4999 since t=1200, p1 at 999 goes idle at t=2400, so A
    sends 4999 then IDLE at one batch end, while B sits idle at 19999. The operator sees A's
    4999 while A is still active (step 1: 4999), then every input idle (step 2: 19999)."""
    def a(ts: int, p: int) -> dict[str, Any]:
        return {**_ev("A", "a", ts), "partition": p}

    doc = run_scenario({
        "sources": [{"name": "A", "partitions": 2, "watermark": WM}, {"name": "B", "watermark": WM}],
        "batches": [[a(5000, 0), a(1000, 1), _ev("B", "b", 20_000)], [a(1000, 1)], [a(1000, 1)], [], []],
        "processing_time_ms": [0, 100, 1200, 1300, 2400],
        "topology": "connect", "final_watermark": False,
    })
    assert doc["batch_watermarks"] == [999, 999, 999, 999, 19_999]
    assert [w["watermark"] for w in doc["watermarks"]] == [999, 4999, 19_999]
    assert doc["multi_step_batch_ends"] == [4]
    assert sorted((t["timer"], t["current_watermark"]) for t in doc["timers"]) == [(1000, 4999), (5000, 19_999)]


@pytest.mark.parametrize(("patch", "field"), [
    ({"partitions": 2}, "partitions"),
    ({"sources": [{"name": "A", "watermark": WM}, {"name": "A", "watermark": WM}]}, "sources[1].name"),
    ({"topology": "zip"}, "topology"),
    ({"topology": "connect", "window": {"kind": "tumbling", "size_ms": 5}}, "window"),
    ({"topology": "union", "timer_delay_ms": 5, "window": {"kind": "tumbling", "size_ms": 5}, "aggregate": "sum"},
     "timer_delay_ms"),
    ({"topology": "connect", "sources": [{"name": "A", "watermark": WM}]}, "sources"),
    ({"topology": "connect", "batches": [[{"key": "a", "ts": 1}]]}, "batches[0][0].source"),
    ({"topology": "connect", "batches": [[_ev("C", "a", 1)]]}, "batches[0][0].source"),
    ({"topology": "connect", "batches": [[{**_ev("A", "a", 1), "partition": 1}]]}, "batches[0][0].partition"),
    ({"topology": "connect", "sources": [{"name": "A", "watermark": {"kind": "nope"}},
                                         {"name": "B", "watermark": WM}]}, "sources[0].watermark.kind"),
])
def test_a_malformed_several_source_scenario_names_the_field(patch: dict[str, Any], field: str) -> None:
    base = {"sources": [{"name": "A", "watermark": WM}, {"name": "B", "watermark": WM}],
            "batches": [[_ev("A", "a", 1)]], "topology": "connect"}
    with pytest.raises(ScenarioError) as e:
        run_scenario({**base, **patch})
    assert e.value.parameter == field


# -- the API, as a user writes it ------------------------------------------------------------
class Sessionize(KeyedProcessFunction):
    """Sums per key; emits the sum 1 s after the last element (timer moved on each element),
    and sends negative values to a side output."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total"))
        self.timer = runtime_context.get_state(ValueStateDescriptor("timer"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        if value["value"] < 0:
            yield NEGATIVE, value  # PyFlink's way; ctx.output(NEGATIVE, value) is Java's
            return
        if self.timer.value() is not None:
            ctx.timer_service().delete_event_time_timer(self.timer.value())
        self.timer.update(ctx.timestamp() + 1000)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1000)
        self.total.update((self.total.value() or 0) + value["value"])
        yield from ()

    def on_timer(self, timestamp: int, ctx: Any, *out: Any) -> Any:
        yield {"key": ctx.get_current_key(), "total": self.total.value(), "at": timestamp}
        self.total.clear()
        self.timer.clear()


NEGATIVE = OutputTag("negative")


def test_a_keyed_process_function_runs_with_state_timers_and_a_side_output() -> None:
    env = StreamExecutionEnvironment()
    batches = [[{"k": "a", "ts": 1000, "value": 1}, {"k": "b", "ts": 1200, "value": 2}],
               [{"k": "a", "ts": 1800, "value": 4}, {"k": "a", "ts": 1900, "value": -1}],
               [{"k": "b", "ts": 5000, "value": 8}]]
    out = (env.from_source(CollectionSource(batches), WatermarkStrategy.for_monotonous_timestamps()
                           .with_timestamp_assigner("ts"))
           .key_by("k").process(Sessionize()))
    main, side = out.collect(), out.get_side_output(NEGATIVE).collect()
    job = ReferenceRuntime().execute(env)
    # batch 2: b@5000 arrives before the batch-end watermark (4999), so it moves b's timer first
    assert main.by_batch[2] == [{"key": "a", "total": 5, "at": 2800}]
    assert main.by_batch[3] == [{"key": "b", "total": 10, "at": 6000}]  # end of input
    assert side.results == [{"k": "a", "ts": 1900, "value": -1}]
    assert job.combined_watermarks() == [1199, 1899, 4999, MAX_TIMESTAMP]


def test_connected_streams_need_keys_before_process() -> None:
    from lowwater.core.errors import PipelineError

    env = StreamExecutionEnvironment()
    a = env.from_source(CollectionSource([[1]]))

    class Co(KeyedCoProcessFunction):
        pass

    with pytest.raises(PipelineError, match="key_by"):
        a.connect(a).process(Co())


def test_one_function_object_used_by_two_operators_keeps_their_state_apart() -> None:
    class Count(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.n = runtime_context.get_state(ValueStateDescriptor("n"))

        def process_element(self, value: Any, ctx: Any) -> Any:
            self.n.update((self.n.value() or 0) + 1)
            yield self.n.value()

    fn = Count()
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")
    e = {"k": "a", "ts": 1}
    first = env.from_source(CollectionSource([[e, e], [e]]), strategy).key_by("k").process(fn).collect()
    second = env.from_source(CollectionSource([[e], []]), strategy).key_by("k").process(fn).collect()
    ReferenceRuntime().execute(env)
    assert first.results == [1, 2, 3]
    assert second.results == [1]


def test_at_the_end_of_input_one_source_whose_partitions_are_all_idle_still_sends_max() -> None:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "shared" / "scenarios" / "next" / "18_all_partitions_idle_nofinal.json"
    doc = run_scenario({**json.loads(path.read_text()), "final_watermark": True})
    # Flink 2.3 drops this MAX while the source is idle, so b [5000, 10000) never fires there
    assert doc["watermarks"][-1] == {"watermark": MAX_TIMESTAMP}
    assert {"key": "b", "window_start": 5000, "window_end": 10000, "value": 4, "fire_index": 0} in doc["results"]


def test_batch_files_sources_reach_a_two_input_operator_in_their_lines_seq_order(tmp_path: Any) -> None:
    """A BatchFilesSource line's ``seq`` is its place in the micro-batch across sources, the order
    Spark's keyed and general paths feed (seq, source, partition, offset). The reference runtime
    dropped it and fed one source's batch after the other's: a0, a1, b0 where Spark saw a0, b0, a1."""
    from lowwater.api import CollectSink, StreamExecutionEnvironment
    from lowwater.core.process import KeyedCoProcessFunction, ValueStateDescriptor
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.spark.sources import BatchFilesSource

    class Order(KeyedCoProcessFunction):  # type: ignore[misc]
        def open(self, rc: Any) -> None:
            self.n = rc.get_state(ValueStateDescriptor("n"))

        def _see(self, value: Any) -> Any:
            self.n.update((self.n.value() or 0) + 1)
            return value["id"], self.n.value()

        def process_element1(self, value: Any, ctx: Any) -> Any:
            yield self._see(value)

        def process_element2(self, value: Any, ctx: Any) -> Any:
            yield self._see(value)

    a = [[{"key": "k", "ts": 10, "id": "a0"}, {"key": "k", "ts": 20, "id": "a1"}]]
    b = [[{"key": "k", "ts": 15, "id": "b0"}]]
    BatchFilesSource.write(tmp_path / "a", a)
    BatchFilesSource.write(tmp_path / "b", b)
    env, sink = StreamExecutionEnvironment(), CollectSink()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")
    one = env.from_source(BatchFilesSource(tmp_path / "a", BatchFilesSource.infer_fields(a), [0]), strategy)
    two = env.from_source(BatchFilesSource(tmp_path / "b", BatchFilesSource.infer_fields(b), [0]), strategy)
    one.connect(two).key_by("key", "key").process(Order()).add_sink(sink)
    env.execute()
    assert sorted(sink.results, key=lambda r: r[1]) == [("a0", 1), ("b0", 2), ("a1", 3)]

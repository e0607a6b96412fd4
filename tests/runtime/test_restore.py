"""State restored into operators built from the current code: data kept, functions new."""

from __future__ import annotations

from typing import Any

from pyspark import cloudpickle

from lowwater.api import CollectionSource, OutputTag, StreamExecutionEnvironment
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows
from lowwater.runtime.job import CompiledJob

BATCHES = [
    [{"key": "a", "ts": 1000, "value": 1, "partition": 0}, {"key": "b", "ts": 1500, "value": 2, "partition": 1}],
    [{"key": "a", "ts": 2500, "value": 4, "partition": 0}, {"key": "b", "ts": 9000, "value": 8, "partition": 1}],
    [{"key": "a", "ts": 9500, "value": 16, "partition": 0}, {"key": "a", "ts": 3000, "value": 32, "partition": 1}],
    [{"key": "b", "ts": 20000, "value": 64, "partition": 0}, {"key": "a", "ts": 21000, "value": 128, "partition": 1}],
]


def build(value_of: Any) -> tuple[StreamExecutionEnvironment, Any, Any]:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    windows = (
        env.from_source(CollectionSource(BATCHES, partitions=2, partition_of="partition"),
                        WatermarkStrategy.for_bounded_out_of_orderness(500)
                        .with_timestamp_assigner(lambda e, prev: e["ts"]).with_idleness(5000))
        .map(lambda e: {**e, "value": value_of(e)})
        .key_by("key").window(EventTimeSessionWindows.with_gap(3000)).allowed_lateness(2000)
        .side_output_late_data(late).sum("value")
    )
    return env, windows.collect(), windows.get_side_output(late).collect()


def test_a_restored_job_continues_with_the_new_code_and_the_old_data() -> None:
    # uninterrupted, with the fixed function all along
    env, results, late = build(lambda e: e["value"] * 10)
    clean = CompiledJob(env)
    clean.start()
    _replay(clean, range(4))
    clean.finish(4)

    # the first two batches with the "broken" function, then a checkpoint...
    env1, results1, _ = build(lambda e: e["value"] * 10 if e["ts"] < 9200 else 1 / 0)
    first = CompiledJob(env1)
    first.start()
    _replay(first, range(2))
    first.detach_sinks()
    saved = cloudpickle.dumps(first)

    # ...restored into the fixed pipeline, which goes on from batch 2
    env2, results2, late2 = build(lambda e: e["value"] * 10)
    second = CompiledJob(env2)
    second.restore_from(cloudpickle.loads(saved))
    _replay(second, range(2, 4), offsets={0: 2, 1: 2})
    second.finish(4)

    got = sorted(map(repr, [*results1.results, *results2.results]))
    assert got == sorted(map(repr, results.results))
    assert late2.results == late.results
    assert list(second.watermark_history().values()) == list(clean.watermark_history().values())


def _replay(job: CompiledJob, batches: range, offsets: dict[int, int] | None = None) -> None:
    from lowwater.api.sources import SourceBatch, SourceRecord

    offsets = dict(offsets or {})
    for i in batches:
        items = []
        for e in BATCHES[i]:
            p = e["partition"]
            items.append(SourceRecord(e, p, offsets.get(p, 0)))
            offsets[p] = offsets.get(p, 0) + 1
        job.step(i, [SourceBatch(tuple(items))], 1000 * i)


def test_a_long_running_job_keeps_one_watermark_per_input_not_one_per_batch() -> None:
    """The soak found the combined-watermark history growing by one entry per batch in the
    engine's state; engines now keep only the last one, so the state stays flat."""
    import pickle

    from lowwater.api import CollectionSource, StreamExecutionEnvironment
    from lowwater.api.sources import SourceBatch, SourceRecord
    from lowwater.core.clock import ManualClock
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.runtime.job import CompiledJob

    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    (env.from_source(CollectionSource([[]], partitions=2), strategy)
     .key_by("key").window(TumblingEventTimeWindows.of(10)).sum("value").collect())
    T0 = 1_700_000_000_000  # same-width integers: pickled sizes compare
    job = CompiledJob(env, ManualClock(0))
    job.detach_sinks()
    job.attach_sinks([type("Discard", (), {"write_batch": lambda *a: None, "open": lambda *a: None})()])
    job.bound_histories()
    sizes = []
    for b in range(60):
        records = tuple(SourceRecord({"key": "k", "ts": T0 + 10 * b + p, "value": 1}, p, b) for p in (0, 1))
        job.step(b, [SourceBatch(records)], 0)
        sizes.append(len(pickle.dumps(job.windows[0].exchange)))
    assert job.windows[0].exchange.history == [T0 + 589], "only the last combined watermark"
    assert job.windows[0].exchange.watermark_or_min() == T0 + 589
    assert sizes[59] == sizes[20], "the exchange's state does not grow with the number of batches"

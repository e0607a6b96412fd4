"""A keyed (co-)process operator's state and timers survive a checkpoint: restored into
operators built from the current code, the run equals an uninterrupted one."""

from __future__ import annotations

from typing import Any

from pyspark import cloudpickle

from lowwater.api import CollectionSource, KeyedCoProcessFunction, StreamExecutionEnvironment, ValueStateDescriptor
from lowwater.api.sources import SourceBatch
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.runtime.job import CompiledJob

LEFT = [[{"k": "a", "ts": 1000}], [{"k": "b", "ts": 2000}], [{"k": "a", "ts": 6000}], [{"k": "b", "ts": 9000}]]
RIGHT = [[{"k": "a", "ts": 500}], [], [{"k": "b", "ts": 7000}], [{"k": "a", "ts": 9500}]]


class CountThenReport(KeyedCoProcessFunction):
    """Counts elements per key from both inputs; a timer 1 s after each reports the count."""

    def __init__(self, factor: int) -> None:
        self.factor = factor

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def _add(self, value: Any, ctx: Any) -> None:
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1000)

    def process_element1(self, value: Any, ctx: Any, out: Any) -> None:
        self._add(value, ctx)

    def process_element2(self, value: Any, ctx: Any, out: Any) -> None:
        self._add(value, ctx)

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        out.collect((ctx.get_current_key(), timestamp, self.count.value() * self.factor))


def _build(factor: int) -> tuple[StreamExecutionEnvironment, Any]:
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")
    left = env.from_source(CollectionSource(LEFT), strategy)
    right = env.from_source(CollectionSource(RIGHT), strategy)
    return env, left.connect(right).key_by("k", "k").process(CountThenReport(factor)).collect()


def _step(job: CompiledJob, batches: range) -> None:
    for i in batches:
        sources = [list(s.source.batches())[i] for s in job.sources]
        job.step(i, [SourceBatch(b.items) for b in sources], 100 * i)


def test_a_restored_co_process_operator_keeps_its_state_and_timers_and_takes_the_new_code() -> None:
    env, clean_out = _build(10)
    clean = CompiledJob(env)
    _step(clean, range(4))
    clean.finish(4)
    assert clean_out.results, "timers should fire"

    env1, out1 = _build(-1)  # the "broken" code, for the first two batches
    first = CompiledJob(env1)
    _step(first, range(2))
    first.detach_sinks()
    saved = cloudpickle.dumps(first)

    env2, out2 = _build(10)  # restored into the fixed code
    second = CompiledJob(env2)
    second.restore_from(cloudpickle.loads(saved))
    _step(second, range(2, 4))
    second.finish(4)
    assert sorted([*out1.results, *out2.results]) == sorted(clean_out.results)
    assert out1.results == []  # the watermark (499) passed no timer before the checkpoint
    assert out2.results and all(n > 0 for _, _, n in out2.results)  # fired with the new code
    assert list(second.watermark_history().values()) == list(clean.watermark_history().values())


class RemindLater(KeyedCoProcessFunction):
    """A processing-time timer 5 s after each element of the first input."""

    def process_element1(self, value: Any, ctx: Any, out: Any) -> None:
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 5000)

    def process_element2(self, value: Any, ctx: Any, out: Any) -> None:
        pass

    def on_timer(self, timestamp: int, ctx: Any, out: Any) -> None:
        out.collect((ctx.get_current_key(), timestamp))


def test_after_the_end_of_input_processing_time_stays_where_it_ended_also_in_a_restored_job() -> None:
    """A step after ``finish`` (a later run of an ended job, whose records are late) fired the
    processing-time timers still pending at the end with its own clock (user probe S, session 62);
    the end of input keeps processing time where it was, as in Flink, in a restored job too."""
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")
    left = env.from_source(CollectionSource([[{"k": "a", "ts": 1000}]]), strategy)
    right = env.from_source(CollectionSource([[{"k": "a", "ts": 500}]]), strategy)
    out = left.connect(right).key_by("k", "k").process(RemindLater()).collect()
    job = CompiledJob(env)
    _step(job, range(1))  # processing time 0: a timer at 5,000
    job.finish(1)
    assert out.results == []
    job.step(2, [SourceBatch(), SourceBatch()], 60_000)
    assert out.results == [], "processing time moved after the end of input"
    sinks = job.detach_sinks()
    restored = CompiledJob(env)
    restored.restore_from(cloudpickle.loads(cloudpickle.dumps(job)))
    restored.attach_sinks(sinks)
    restored.step(3, [SourceBatch(), SourceBatch()], 120_000)
    assert out.results == [] and restored.clock.now_ms() == 0

    unfinished = CompiledJob(env)  # the same step before any end fires the timer
    _step(unfinished, range(1))
    unfinished.step(1, [SourceBatch(), SourceBatch()], 60_000)
    assert out.results == [("a", 5000)]


def test_a_snapshot_from_before_session_62_that_ended_keeps_processing_time_where_it_ended() -> None:
    """A snapshot written before session 62 has no ``finished``: one whose input had ended (every
    operator at MAX) restores as finished, so a later run fires no processing-time timer the end
    left pending; one whose input had not ended still fires it."""
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")
    left = env.from_source(CollectionSource([[{"k": "a", "ts": 1000}]]), strategy)
    right = env.from_source(CollectionSource([[{"k": "a", "ts": 500}]]), strategy)
    out = left.connect(right).key_by("k", "k").process(RemindLater()).collect()

    def old_snapshot(end: bool) -> CompiledJob:
        job = CompiledJob(env)
        _step(job, range(1))  # processing time 0: a timer at 5,000
        if end:
            job.finish(1)
        sinks = job.detach_sinks()
        old = cloudpickle.loads(cloudpickle.dumps(job))
        del old.__dict__["finished"]  # as the code before session 62 pickled it
        restored = CompiledJob(env)
        restored.restore_from(old)
        restored.attach_sinks(sinks)
        return restored

    old_snapshot(end=True).step(2, [SourceBatch(), SourceBatch()], 60_000)
    assert out.results == [], "the pending timer fired after the end"
    old_snapshot(end=False).step(1, [SourceBatch(), SourceBatch()], 60_000)
    assert out.results == [("a", 5000)]

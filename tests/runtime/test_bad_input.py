"""Bad input on the reference runtime (and so on Spark's general path): where each record goes.

Every record read ends in a window, the late output or the dead-letter output (with its
reason and source position), and the accounting balances.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from lowwater.api import CollectionSource, OutputTag, StreamExecutionEnvironment
from lowwater.api.sinks import FunctionSink
from lowwater.core.clock import ManualClock
from lowwater.core.errors import BadRecordError, ConfigurationError, UserFunctionError
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import SlidingEventTimeWindows, TumblingEventTimeWindows
from lowwater.observe.accounting import Accounting

BY_TS = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")


def _ev(key: Any, ts: Any, value: Any = 1, p: int = 0, **extra: Any) -> dict[str, Any]:
    return {"key": key, "ts": ts, "value": value, "p": p, **extra}


def _run(batches: list[list[dict[str, Any]]], *, partitions: int | list[int] = 1, size: int = 10,
         strategy: WatermarkStrategy[Any] = BY_TS, sliding: bool = False,
         aggregate: str = "sum") -> tuple[list[Any], list[Any], Any, Any]:
    env = StreamExecutionEnvironment()
    late = OutputTag("late")
    stream = env.from_source(CollectionSource(batches, partitions=partitions, partition_of="p"), strategy)
    assigner = SlidingEventTimeWindows.of(size, size // 2) if sliding else TumblingEventTimeWindows.of(size)
    windowed = stream.key_by("key").window(assigner).side_output_late_data(late).aggregate(aggregate, field="value")
    results = windowed.collect()
    late_sink = windowed.get_side_output(late).collect()
    dead: list[Any] = []
    result = env.execute(clock=ManualClock(0), dead_letter_sink=FunctionSink(dead.append))
    assert dead == result.dead_letters, "the dead-letter sink gets what the result lists"
    return results.results, late_sink.results, result, result.accounting()


def _reasons(result: Any) -> list[tuple[str, int, int]]:
    return [(d["reason"], d["partition"], d["offset"]) for d in result.dead_letters]


@pytest.mark.parametrize("ts", [None, "1000", True, math.nan, math.inf, -math.inf])
def test_a_missing_null_or_non_numeric_timestamp_is_dead_lettered(ts: Any) -> None:
    records = [_ev("a", 1), _ev("a", 2), _ev("a", 3)]
    if ts is None:
        del records[1]["ts"]
    else:
        records[1]["ts"] = ts
    results, _, result, acc = _run([records])
    assert _reasons(result) == [("missing or non-numeric timestamp (ts)", 0, 1)]
    assert result.dead_letters[0]["record"] == records[1]
    assert [(r.key, r.value) for r in results] == [("a", 2)]
    assert acc == Accounting(rows_in=3, rows_windowed=2, rows_late=0, rows_dead_lettered=1)


@pytest.mark.parametrize("ts", [2**63, -(2**63) - 1, 1e20])
def test_a_timestamp_beyond_the_64_bit_millisecond_range_is_dead_lettered(ts: Any) -> None:
    _, _, result, acc = _run([[_ev("a", ts), _ev("a", 5)]])
    assert [d["reason"].split(":")[0] for d in result.dead_letters] == [
        "timestamp out of the 64-bit millisecond range (ts)"]
    assert acc.balanced and acc.rows_dead_lettered == 1 and acc.rows_windowed == 1


def test_negative_timestamps_are_valid_and_windowed_by_floor() -> None:
    results, _, result, acc = _run([[_ev("a", -15), _ev("a", -1), _ev("a", 0), _ev("a", 9)]])
    assert sorted((r.window_start, r.window_end, r.value) for r in results) == [(-20, -10, 1), (-10, 0, 1), (0, 10, 2)]
    assert not result.dead_letters and acc.balanced and acc.rows_windowed == 4


def test_timestamps_from_other_centuries_are_windowed() -> None:
    year_1650, year_2400 = -10_000_000_000_000, 13_600_000_000_000
    results, _, _, acc = _run([[_ev("a", year_1650), _ev("b", year_2400)]], size=1000)
    assert sorted((r.key, r.window_start) for r in results) == [("a", year_1650), ("b", year_2400)]
    assert acc == Accounting(rows_in=2, rows_windowed=2, rows_late=0, rows_dead_lettered=0)


def test_long_min_value_is_the_no_timestamp_marker_and_dead_lettered() -> None:
    _, _, result, acc = _run([[_ev("a", MIN_TIMESTAMP), _ev("a", 1)]])
    assert _reasons(result) == [("timestamp is Long.MIN_VALUE, Flink's no-timestamp marker (ts)", 0, 0)]
    assert acc.balanced


@pytest.mark.parametrize("window", ["tumbling", "sliding"])
def test_a_source_timestamp_that_is_null_or_the_marker_is_dead_lettered_as_on_the_native_path(window: str) -> None:
    """With source timestamps (no assigner), a record whose source gave none, or Long.MIN_VALUE, is a
    dead letter with the native path's reason. The reference runtime failed the job with a
    ConfigurationError asking whether assign_timestamps_and_watermarks was forgotten."""
    env = StreamExecutionEnvironment()
    src = CollectionSource([[_ev("a", 100), _ev("a", None), _ev("b", 200), _ev("a", MIN_TIMESTAMP), _ev("a", 5)]],
                           timestamp_of=lambda e: e["ts"])
    assigner = SlidingEventTimeWindows.of(10, 5) if window == "sliding" else TumblingEventTimeWindows.of(10)
    sums = (env.from_source(src, WatermarkStrategy.for_bounded_out_of_orderness(0))
            .key_by("key").window(assigner).sum("value").collect())
    result = env.execute(clock=ManualClock(0))
    assert _reasons(result) == [("missing or non-numeric timestamp (source timestamp)", 0, 1),
                                ("timestamp is Long.MIN_VALUE, Flink's no-timestamp marker (source timestamp)", 0, 3)]
    assert {(r.key, r.window_start) for r in sums.results} >= {("a", 100), ("b", 200), ("a", 0)}
    assert result.accounting() == Accounting(rows_in=5, rows_windowed=3, rows_late=0, rows_dead_lettered=2)


def test_a_marker_a_python_assigner_returned_is_a_dead_letter_that_names_the_assigner() -> None:
    """Long.MIN_VALUE from a Python assigner is the window's to reject (Flink's window assigners
    throw on it; a process function takes it), and the reason names the assigner: it said "(source
    timestamp)", which sent the on-call engineer to the producer's timestamps (a user probe,
    session 64). A union names every way in that could have given it."""
    def assign(e: dict[str, Any], prev: int) -> int:
        return MIN_TIMESTAMP if e["value"] == 2 else e["ts"]

    env = StreamExecutionEnvironment()
    records = [_ev("a", 100, 1), _ev("a", 200, 2), _ev("a", 300, 3)]
    stamped = CollectionSource([records], timestamp_of=lambda e: e["ts"])  # the source's: the assigner overrides them
    sums = (env.from_source(stamped, WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(assign))
            .key_by("key").window(TumblingEventTimeWindows.of(1000)).sum("value").collect())
    result = env.execute(clock=ManualClock(0))
    assert _reasons(result) == [("timestamp is Long.MIN_VALUE, Flink's no-timestamp marker "
                                 "(TimestampAssigner('test_a_marker_a_python_assigner_returned_is_a_dead_letter_that_"
                                 "names_the_assigner.<locals>.assign') returned it)", 0, 1)]
    assert [(r.key, r.value) for r in sums.results] == [("a", 4)]

    env = StreamExecutionEnvironment()
    by_source = env.from_source(CollectionSource([[_ev("b", MIN_TIMESTAMP, 5)]], timestamp_of=lambda e: e["ts"]),
                                WatermarkStrategy.for_bounded_out_of_orderness(0))
    by_field = env.from_source(CollectionSource([[_ev("c", 100, 6)]]), BY_TS)
    by_assigner = env.from_source(stamped, WatermarkStrategy.for_bounded_out_of_orderness(0)
                                  .with_timestamp_assigner(assign))
    (by_source.union(by_field, by_assigner).key_by("key").window(TumblingEventTimeWindows.of(1000))
     .sum("value").collect())
    reasons = {d["reason"] for d in env.execute(clock=ManualClock(0)).dead_letters}
    assert reasons == {"timestamp is Long.MIN_VALUE, Flink's no-timestamp marker (source timestamp, or "
                       "TimestampAssigner('test_a_marker_a_python_assigner_returned_is_a_dead_letter_that_"
                       "names_the_assigner.<locals>.assign') returned it)"}


def test_an_event_time_window_with_no_watermark_strategy_before_it_is_a_configuration_error() -> None:
    env = StreamExecutionEnvironment()
    src = CollectionSource([[_ev("a", 100), _ev("a", None)]], timestamp_of=lambda e: e["ts"])
    env.from_source(src).key_by("key").window(TumblingEventTimeWindows.of(10)).sum("value").collect()
    with pytest.raises(ConfigurationError, match=r"offset 1 has no timestamp\. Did you forget to call "
                                                 "assign_timestamps_and_watermarks"):
        env.execute(clock=ManualClock(0))


@pytest.mark.parametrize("missing", ["absent", "null"])
def test_a_missing_or_null_key_is_dead_lettered(missing: str) -> None:
    bad = _ev(None, 4, p=1)
    if missing == "absent":
        del bad["key"]
    results, _, result, acc = _run([[_ev("a", 1), bad], [_ev("a", 20, p=1)]], partitions=2)
    assert _reasons(result) == [("missing key (key)", 1, 0)]
    assert acc == Accounting(rows_in=3, rows_windowed=2, rows_late=0, rows_dead_lettered=1)
    assert sorted((r.key, r.window_start, r.value) for r in results) == [("a", 0, 1), ("a", 20, 1)]


def user_of(e: dict[str, Any]) -> Any:
    return e.get("key")


def test_a_key_selector_function_that_gives_none_dead_letters_the_record() -> None:
    """A record with no key is a dead letter also where the key is a function's (Flink's job fails on
    a null key): the windows of key ``None`` gathered every such record without a word."""
    env = StreamExecutionEnvironment()
    batches = [[_ev("a", 1), _ev(None, 4)], [_ev("a", 20)]]
    results = (env.from_source(CollectionSource(batches), BY_TS).key_by(user_of)
               .window(TumblingEventTimeWindows.of(10)).sum("value")).collect()
    result = env.execute(clock=ManualClock(0))
    assert _reasons(result) == [("missing key (user_of)", 0, 1)]
    assert sorted((r.key, r.window_start) for r in results.results) == [("a", 0), ("a", 20)]
    assert result.accounting() == Accounting(rows_in=3, rows_windowed=2, rows_late=0, rows_dead_lettered=1)


@pytest.mark.parametrize(("value", "reason"), [(None, "missing value (value)"),
                                               ("x", "non-numeric value (value): 'x'")])
def test_a_value_the_aggregate_cannot_take_is_dead_lettered_and_leaves_no_trace(value: Any, reason: str) -> None:
    results, _, result, acc = _run([[_ev("a", 1, 5), _ev("b", 2, value), _ev("a", 3, 7)]], sliding=True)
    assert _reasons(result) == [(reason, 0, 1)]
    assert {r.key for r in results} == {"a"}, "the bad record opened no window for its key"
    assert acc.balanced and acc.rows_dead_lettered == 1 and acc.rows_windowed == 2


def test_count_needs_no_value_but_min_keeps_strings() -> None:
    results, _, result, _ = _run([[_ev("a", 1, "pear"), _ev("a", 2, "apple")]], aggregate="min")
    assert [r.value for r in results] == ["apple"] and not result.dead_letters


def test_extra_fields_schema_drift_are_ignored() -> None:
    results, _, result, acc = _run([[_ev("a", 1), _ev("a", 2, 2, colour="red"), {"key": "a", "ts": 3, "value": 4}]])
    assert [r.value for r in results] == [7] and not result.dead_letters and acc.rows_windowed == 3


def test_late_records_are_counted_and_go_to_the_late_output() -> None:
    results, late, _, acc = _run([[_ev("a", 25)], [_ev("a", 3), _ev("a", 27)]])
    assert [e["ts"] for e in late] == [3]
    assert sorted((r.window_start, r.value) for r in results) == [(20, 2)]
    assert acc == Accounting(rows_in=3, rows_windowed=2, rows_late=1, rows_dead_lettered=0)


def test_a_user_function_may_dead_letter_a_record_on_purpose() -> None:
    def parse(e: dict[str, Any]) -> dict[str, Any]:
        if e["value"] < 0:
            raise BadRecordError(f"negative reading {e['value']}")
        return e

    env = StreamExecutionEnvironment()
    src = CollectionSource([[_ev("a", 1, 3), _ev("a", 2, -1), _ev("a", 3, 4)]])
    env.from_source(src, BY_TS).map(parse).key_by("key").window(TumblingEventTimeWindows.of(10)).sum("value").collect()
    result = env.execute(clock=ManualClock(0))
    assert _reasons(result) == [("negative reading -1", 0, 1)]
    acc = result.accounting()
    assert acc.scope == "window operator" and acc.rows_in == 2 and acc.balanced, "a map sits before the window"


@pytest.mark.parametrize("kind", ["aggregate", "reduce"])
def test_an_element_one_of_its_sliding_windows_rejects_is_in_none_of_them(kind: str) -> None:
    """A user's ``add`` (or ``reduce``) that rejects an element for one window's total: the element
    had been added to the window before it, whose result counted it, and it was also a dead
    letter: counted twice (found by a probe of session 37)."""
    from lowwater.core.windows import AggregateFunction

    class CappedSum(AggregateFunction[Any, int, int]):
        def create_accumulator(self) -> int:
            return 0

        def add(self, value: Any, acc: int) -> int:
            if acc + value["value"] > 14:
                raise BadRecordError(f"total would pass 14 ({acc} + {value['value']})")
            return acc + value["value"]

        def merge(self, a: int, b: int) -> int:
            return a + b

        def get_result(self, acc: int) -> int:
            return acc

    def capped(a: Any, b: Any) -> Any:
        if a["value"] + b["value"] > 14:
            raise BadRecordError("total would pass 14")
        return {**a, "value": a["value"] + b["value"]}

    env = StreamExecutionEnvironment()
    windows = (env.from_source(CollectionSource([[{"key": "a", "ts": 500, "value": 5}, {"key": "a", "ts": 1500,
                                                                                       "value": 10}]]),
                               WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
               .key_by("key").window(SlidingEventTimeWindows.of(2000, 1000)))
    out = (windows.aggregate(CappedSum()) if kind == "aggregate" else windows.reduce(capped)).collect()
    job = env.execute(clock=ManualClock(0))
    values = [(r.window_start, r.value if kind == "aggregate" else r.value["value"]) for r in out.results]
    assert values == [(-1000, 5), (0, 5)]  # the element at 1500 is in neither [0, 2 s) nor [1 s, 3 s)
    assert [d["offset"] for d in job.dead_letters] == [1]
    assert job.accounting() == Accounting(rows_in=2, rows_windowed=1, rows_late=0, rows_dead_lettered=1)


def test_a_bad_record_error_from_a_window_function_fails_the_job_naming_the_function() -> None:
    """A window function fires for a whole window: there is no one record to dead-letter, so the job
    fails, as for any error raised there. It failed with the bare ``BadRecordError``, naming neither
    the function nor the way out."""
    def pwf(key: Any, ctx: Any, elements: Any) -> Any:
        raise BadRecordError("window with 13")

    env = StreamExecutionEnvironment()
    (env.from_source(CollectionSource([[{"key": "a", "ts": 100, "value": 13}], [{"key": "a", "ts": 5000, "value": 1}]]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .key_by("key").window(TumblingEventTimeWindows.of(1000)).process(pwf).collect())
    with pytest.raises(UserFunctionError, match=r"window function of .* raised BadRecordError: window with 13\. Fix"):
        env.execute(clock=ManualClock(0))


def test_a_user_assigner_that_raises_fails_the_job_naming_function_partition_and_offset() -> None:
    def ts_of(e: dict[str, Any], _: int) -> int:
        return int(e["ts"]) // (e["value"] - 2)

    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ts_of)
    with pytest.raises(UserFunctionError) as e:
        _run([[_ev("a", 1, 1, p=1), _ev("a", 2, 2, p=1)]], partitions=[0, 1], strategy=strategy)
    assert "ZeroDivisionError" in str(e.value) and "at partition 1, offset 1" in str(e.value)


def test_a_partition_that_appears_mid_stream_holds_the_watermark_from_then_on() -> None:
    batches = [[_ev("a", 5, p=0), _ev("a", 15, p=0)], [_ev("b", 12, p=1), _ev("a", 35, p=0)], [_ev("b", 36, p=1)]]
    results, _, result, acc = _run(batches, partitions=[0])
    marks = result.batches[1].windows
    assert list(next(iter(marks.values()))["partition_watermarks"]) == ["0", "1"], "partition 1 registered"
    # after batch 1 the combined watermark is min(34, 11): window [10, 20) of b stays open until batch 2
    fired = [(r.key, r.window_start) for r in results]
    assert ("b", 10) in fired and acc == Accounting(rows_in=5, rows_windowed=5, rows_late=0, rows_dead_lettered=0)


def test_a_partition_that_disappears_holds_windows_until_idleness_releases_them() -> None:
    batches = [[_ev("a", 5, p=0), _ev("b", 6, p=1)], [_ev("a", 25, p=0)], [_ev("a", 45, p=0)], [_ev("a", 65, p=0)]]
    held, _, held_result, _ = _run(batches, partitions=2)
    # without idleness partition 1 (gone after batch 0) holds the combined watermark at 5
    assert [b.windows[next(iter(b.windows))]["combined_watermark"] for b in held_result.batches[:-1]] == [4, 5, 5, 5]
    strategy = BY_TS.with_idleness(1)  # the reference clock stays at 0 here: idleness needs time to pass
    env = StreamExecutionEnvironment()
    src = CollectionSource(batches, partitions=2, partition_of="p", processing_times_ms=[0, 10, 20, 30])
    sink = env.from_source(src, strategy).key_by("key").window(TumblingEventTimeWindows.of(10)).sum("value").collect()
    result = env.execute()
    combined = [b.windows[next(iter(b.windows))]["combined_watermark"] for b in result.batches[:-1]]
    assert combined[-1] == 64, "partition 1 went idle and stopped holding windows back"
    assert {(r.key, r.window_start) for r in sink.results} == {(r.key, r.window_start) for r in held}
    assert result.accounting() == Accounting(rows_in=5, rows_windowed=5, rows_late=0, rows_dead_lettered=0)


def test_an_element_a_process_function_rejects_is_counted_once_and_emits_nothing() -> None:
    """A BadRecordError from ``process_element`` dead-letters the element; it was also counted as
    processed (``rows_windowed``), so the accounting came out one short, and what the function had
    emitted before raising went out with the next element."""
    from lowwater.core.process import KeyedProcessFunction

    class Rejecting(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield ("seen", value["value"])
            if value["value"] == 13:
                raise BadRecordError("13 is rejected")
            yield ("kept", value["value"])

    env = StreamExecutionEnvironment()
    recs = [{"key": "a", "ts": 1, "value": 1, "p": 0}, {"key": "a", "ts": 2, "value": 13, "p": 0},
            {"key": "a", "ts": 3, "value": 2, "p": 0}]
    out = (env.from_source(CollectionSource([recs], partitions=1, partition_of="p"),
                           WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
           .key_by("key").process(Rejecting()).collect())
    dead: list[Any] = []
    result = env.execute(clock=ManualClock(0), dead_letter_sink=FunctionSink(dead.append))
    assert out.results == [("seen", 1), ("kept", 1), ("seen", 2), ("kept", 2)]
    assert [d["offset"] for d in dead] == [1] and "13 is rejected" in dead[0]["reason"]
    assert str(result.accounting()) == "3 rows in = 2 processed + 0 late + 1 dead-lettered"


@pytest.mark.parametrize("inputs", [1, 2])
def test_a_process_functions_account_covers_the_records_dead_lettered_before_it(inputs: int) -> None:
    """A process function (one input, or two by ``connect``) fed straight from its sources accounts
    for every record read, as a window does: a record without a timestamp is dead-lettered at its
    source and counted. The account was the function's own (its inputs), so that record was in no
    term of it, while the job's totals counted it read; a map before the function still makes the
    account the operator's, named as a process operator's."""
    from lowwater.core.process import KeyedCoProcessFunction, KeyedProcessFunction

    class One(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value["user"]

    class Two(KeyedCoProcessFunction):
        def process_element1(self, value: Any, ctx: Any) -> Any:
            yield value["user"]

        def process_element2(self, value: Any, ctx: Any) -> Any:
            yield value["user"]

    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ms")
    rows = [{"user": "a", "ms": 1000}, {"user": "a", "ms": None}, {"user": None, "ms": 1200}]
    for mapped in (False, True):
        env = StreamExecutionEnvironment()
        a = env.from_source(CollectionSource([rows]), strategy, name="A")
        if mapped:
            a = a.map(lambda r: r)
        if inputs == 1:
            out = a.key_by("user").process(One()).collect()
        else:
            b = env.from_source(CollectionSource([[{"user": "b", "ms": 5}]]), strategy, name="B")
            out = a.connect(b).key_by("user", "user").process(Two()).collect()
        dead: list[Any] = []
        result = env.execute(clock=ManualClock(0), dead_letter_sink=FunctionSink(dead.append))
        assert sorted(out.results) == sorted(["a", "b"][:inputs])
        assert len(dead) == 2, dead
        account = result.accounting()
        assert account.balanced, account
        if mapped:  # the record without a timestamp never reaches the map's output
            assert str(account) == (f"{inputs + 1} rows in = {inputs} processed + 0 late + 1 dead-lettered "
                                    "(at the process operator)")
        else:
            assert str(account) == f"{inputs + 2} rows in = {inputs} processed + 0 late + 2 dead-lettered"


def test_a_dead_letter_of_a_job_with_several_sources_names_its_source() -> None:
    """Its partition and offset alone do not say which source they are in: ``source`` does, the
    source's name, or ``name#k`` where two sources share one; a job with one source has none."""
    def job(names: tuple[str | None, str | None, str | None]) -> list[Any]:
        env = StreamExecutionEnvironment()
        streams = [env.from_source(CollectionSource([[_ev("k", 1), _ev(None, 2)]]), BY_TS,
                                   **({"name": n} if n else {})) for n in names]
        first, *rest = streams
        (first.union(*rest) if rest else first).key_by("key").window(
            TumblingEventTimeWindows.of(10)).sum("value").collect()
        result = env.execute(clock=ManualClock(0))
        return sorted(d.get("source", "-") for d in result.dead_letters)

    assert job(("clicks", "orders", None)) == ["clicks", "orders", "source"]
    assert job((None, None, "orders")) == ["orders", "source#0", "source#1"]
    assert job(("clicks", None, None)[:1]) == ["-"]


def test_each_batchs_metrics_line_names_the_reasons_of_its_own_dead_letters() -> None:
    """The reference runtime's lines had no reasons, so ``lowwater status`` on a checkpoint it wrote
    printed an empty ``dead letters:`` line."""
    _, _, result, _ = _run([[_ev(None, 1), _ev("a", 2)], [_ev("a", 3)], [_ev("b", None), _ev(None, 5), _ev("c", 6)]])
    assert [line.dead_letter_reasons for line in result.lines()] == [
        {"missing key (key)": 1}, {}, {"missing or non-numeric timestamp (ts)": 1, "missing key (key)": 1},
        {}]  # the end of input
    assert sum(line.rows_dead_lettered for line in result.lines()) == len(result.dead_letters) == 3


def test_a_co_process_function_missing_a_method_is_refused_when_the_pipeline_is_built() -> None:
    """It failed the job at the first element of the second input with a bare NotImplementedError,
    naming neither the method nor the input."""
    from lowwater.core.process import KeyedCoProcessFunction, KeyedProcessFunction

    class OnlyFirst(KeyedCoProcessFunction):
        def process_element1(self, value: Any, ctx: Any) -> Any:
            yield value

    class Nothing(KeyedProcessFunction):
        pass

    env = StreamExecutionEnvironment()
    a, b = env.from_collection([{"k": 1}]), env.from_collection([{"k": 2}])
    with pytest.raises(ConfigurationError, match="OnlyFirst does not implement process_element2"):
        a.connect(b).key_by("k", "k").process(OnlyFirst())
    with pytest.raises(ConfigurationError, match="Nothing does not implement process_element"):
        a.key_by("k").process(Nothing())


def test_an_open_that_raises_fails_the_job_naming_open_and_no_record() -> None:
    """It was blamed on the first record: ``raised RuntimeError: cannot open at partition 0, offset 0``."""
    from lowwater.core.process import KeyedProcessFunction

    class OpenRaises(KeyedProcessFunction):
        def open(self, rc: Any) -> None:
            raise RuntimeError("cannot open")

        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value

    env = StreamExecutionEnvironment()
    env.from_collection([{"k": 1}]).key_by("k").process(OpenRaises()).collect()
    with pytest.raises(UserFunctionError) as failed:
        env.execute(clock=ManualClock(0))
    assert str(failed.value).startswith(
        "user function process function of keyed process (open) raised RuntimeError: cannot open. Fix")


def test_a_custom_trigger_on_session_windows_without_can_merge_says_what_to_implement() -> None:
    from lowwater.core.errors import shown
    from lowwater.core.windows import EventTimeSessionWindows
    from lowwater.core.windows.trigger import Trigger, TriggerResult

    class EveryElement(Trigger[Any]):
        def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> TriggerResult:
            return TriggerResult.FIRE

        def on_event_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
            return TriggerResult.CONTINUE

        def on_processing_time(self, time: int, window: Any, ctx: Any) -> TriggerResult:
            return TriggerResult.CONTINUE

        def clear(self, window: Any, ctx: Any) -> None:
            pass

    assert shown(EveryElement()) == "EveryElement"  # not <...EveryElement object at 0x7f...>
    env = StreamExecutionEnvironment()
    (env.from_collection([{"k": "a", "ts": 1}])
     .assign_timestamps_and_watermarks(BY_TS).key_by("k").window(EventTimeSessionWindows.with_gap(10))
     .trigger(EveryElement()).sum("ts").collect())
    with pytest.raises(ConfigurationError, match=r"EveryElement cannot be used with merging windows .*: implement "
                                                 r"can_merge\(\) to return True and on_merge"):
        env.execute(clock=ManualClock(0))


def test_a_record_that_several_operators_reject_for_one_reason_is_one_dead_letter() -> None:
    """A Spark ``agg(sum, count, avg, max)`` becomes four window operators over one source: each
    rejected a bad record, and each wrote it to the dead-letter output, so the table held every bad
    record three or four times and the job's ``rows_dead_lettered`` (11) exceeded its ``rows_in`` (4)
    (a user probe, session 58). One letter per record and reason now; each operator still counts
    what it rejected, and a record one operator takes (``count`` needs no value) is in its windows."""
    base = 1_704_067_200_000
    batch = [{"user": "a", "ts": base + 1000, "amount": 1.0, "p": 0},
             {"user": "a", "ts": None, "amount": 1.0, "p": 0},
             {"user": None, "ts": base + 2000, "amount": 1.0, "p": 0},
             {"user": "b", "ts": base + 3000, "amount": None, "p": 0}]
    env = StreamExecutionEnvironment()
    source = env.from_source(CollectionSource([batch], partition_of="p", timestamp_of=lambda e: e["ts"]),
                             WatermarkStrategy.for_bounded_out_of_orderness("10 seconds"))
    outs = {a: source.key_by("user").window(TumblingEventTimeWindows.of("1 minute"))
            .aggregate(a, field=None if a == "count" else "amount").collect() for a in ("sum", "count", "avg", "max")}
    result = env.execute()
    assert sorted((d["offset"], d["reason"]) for d in result.dead_letters) == [
        (1, "missing or non-numeric timestamp (source timestamp)"), (2, "missing key (user)"),
        (3, "missing value (amount)")]
    assert [b.rows_dead_lettered for b in result.batches] == [3, 0]
    assert sorted((r.key, r.value) for r in outs["count"].results) == [("a", 1), ("b", 1)]
    assert sorted((r.key, r.value) for r in outs["sum"].results) == [("a", 1.0)]
    # each operator's own account: count rejects two of them, the three others three
    assert sorted(w["operator_rows_dead_lettered"] for w in result.batches[-1].windows.values()) == [2, 3, 3, 3]

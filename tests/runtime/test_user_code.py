"""user_code_failed: what a user function raised becomes a dead letter, passes through, or names the function."""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.core.errors import BadRecordError, ConfigurationError, UserFunctionError
from lowwater.runtime.records import Record
from lowwater.runtime.user_code import user_code_failed

RECORD = Record({"v": 1}, 1000, ("src", 2), partition=2, offset=7)


def test_a_bad_record_goes_to_on_bad_and_nothing_is_raised() -> None:
    seen: list[tuple[Record, str]] = []
    user_code_failed(BadRecordError("no key"), "map f", RECORD, on_bad=lambda r, e: seen.append((r, e.reason)))
    assert seen == [(RECORD, "no key")]


def test_a_bad_record_with_no_record_to_reject_fails_naming_the_function() -> None:
    """A window function firing a whole window, a timer: there is no one record to dead-letter."""
    cause = BadRecordError("no key")
    with pytest.raises(UserFunctionError, match="user function window function of w raised BadRecordError: no key") \
            as info:
        user_code_failed(cause, "window function of w")
    assert info.value.__cause__ is cause


def test_any_other_exception_names_the_function_and_the_record_position() -> None:
    cause = KeyError("v")
    with pytest.raises(UserFunctionError) as info:
        user_code_failed(cause, "map parse", RECORD)
    assert str(info.value) == ("user function map parse raised KeyError: 'v' at partition 2, offset 7. "
                               "Fix the function and restart; processing resumes from the last completed batch.")
    assert info.value.__cause__ is cause


def test_a_failure_outside_a_record_names_the_partition_if_given() -> None:
    with pytest.raises(UserFunctionError, match=r"raised ValueError: x at partition 3\. "):
        user_code_failed(ValueError("x"), "watermark generator (g)", partition=3)


def test_lowwater_errors_are_raised_unchanged_unless_wrapped() -> None:
    error = ConfigurationError("x", "y")
    with pytest.raises(ConfigurationError) as info:
        user_code_failed(error, "map f", RECORD)
    assert info.value is error
    with pytest.raises(UserFunctionError, match="user function key_by k raised ConfigurationError"):
        user_code_failed(error, "key_by k", RECORD, wrap_lowwater=True)


def _failing_window(**kwargs: Any) -> str:
    """The message of the reference runtime's failure for one record (partition 1, offset 1) that a
    windowed pipeline's own code fails on."""
    from lowwater.api import CollectionSource, StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows

    records = [{"k": "a", "ts": 100, "v": 1, "p": 1}, {"k": "b", "ts": 200, "v": 0, "p": 1}]
    env = StreamExecutionEnvironment()
    stream = env.from_source(CollectionSource([records], partitions=2, partition_of="p"),
                             WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
    if "map" in kwargs:
        stream = stream.map(kwargs["map"])
    windowed = stream.key_by(kwargs.get("key", "k")).window(TumblingEventTimeWindows.of(1000))
    if "trigger" in kwargs:
        windowed = windowed.trigger(kwargs["trigger"])
    (windowed.aggregate(kwargs["aggregate"]) if "aggregate" in kwargs else windowed.sum("v")).collect()
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    return str(info.value)


def test_exit_in_a_function_is_its_failure_named_with_its_position() -> None:
    """``sys.exit()`` in a map is the map's failure: on Spark's general path it escaped every
    ``except Exception`` and the query waited for ever for its batch."""
    def parse(e: dict[str, Any]) -> dict[str, Any]:
        if e["v"] == 0:
            raise SystemExit(3)
        return e

    assert _failing_window(map=parse).startswith(
        "user function map test_exit_in_a_function_is_its_failure_named_with_its_position.<locals>.parse raised "
        "SystemExit: 3 at partition 1, offset 1.")


def test_an_exception_whose_text_fails_still_names_the_function_and_position() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("__str__ exploded")

    def parse(e: dict[str, Any]) -> dict[str, Any]:
        if e["v"] == 0:
            raise Unprintable()
        return e

    message = _failing_window(map=parse)
    assert "parse raised Unprintable at partition 1, offset 1." in message, message


def test_a_window_operator_names_which_of_its_functions_raised() -> None:
    """A trigger, an aggregate function's ``add`` and a key selector's unhashable key were all said to
    be the window function's failure."""
    from lowwater.core.windows import AggregateFunction, CountTrigger

    class Strict(CountTrigger):
        def on_element(self, element: Any, timestamp: int, window: Any, ctx: Any) -> Any:
            return 1 // element["v"] and super().on_element(element, timestamp, window, ctx)

    class SumAgg(AggregateFunction):  # type: ignore[type-arg]
        def create_accumulator(self) -> int:
            return 0

        def add(self, value: dict[str, Any], acc: int) -> int:
            return acc + 10 // value["v"]

        def get_result(self, acc: int) -> int:
            return acc

        def merge(self, a: int, b: int) -> int:
            return a + b

    assert "user function trigger Strict of window " in _failing_window(trigger=Strict(2))
    assert "raised ZeroDivisionError" in _failing_window(trigger=Strict(2))
    assert "user function aggregate function SumAgg of window " in _failing_window(aggregate=SumAgg())
    message = _failing_window(key=lambda e: [e["k"]])
    assert message.startswith("user function key_by ") and "unhashable type: 'list' at partition 1" in message, message


def test_root_cause_finds_an_exception_python_prints_without_a_message() -> None:
    from lowwater.core.failures import root_cause

    text = ("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function. Return Message: "
            "Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n    raise KeyboardInterrupt\n"
            "KeyboardInterrupt\n")
    assert root_cause(text) == "KeyboardInterrupt"


@pytest.mark.parametrize("raised", ["psycopg2.errors.UniqueViolation", "requests.exceptions.Timeout", "SinkFailed"])
def test_root_cause_names_an_exception_whatever_its_class_is_called(raised: str) -> None:
    """A sink function's ``UniqueViolation`` (psycopg2's) or ``Timeout`` (requests'): only names
    ending in Error, Exception, Exit or Interrupt were found, and the cause given was the wrapper's
    first line, which ends at the traceback's header (a user probe, session 53)."""
    from lowwater.core.failures import root_cause

    text = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] "
            "An error occurred in the user provided function in foreach batch sink. Reason: An exception was raised "
            "by the Python Proxy. Return Message: Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.11/site-packages/pyspark/sql/utils.py", line 163, in call\n'
            "    self.func(DataFrame(jdf, wrapped_session_jdf), batch_id)\n"
            '  File "/jobs/sink.py", line 12, in write\n    cur.execute(sql)\n'
            f'{raised}: duplicate key value violates unique constraint "orders_pkey"\n\n'
            "\tat py4j.Protocol.getReturnValue(Protocol.java:476)\n")
    name = raised.rsplit(".", 1)[-1]
    assert root_cause(text) == f'{name}: duplicate key value violates unique constraint "orders_pkey"'
    assert root_cause(text.replace(': duplicate key value violates unique constraint "orders_pkey"', "")) == name


def test_a_failure_says_the_line_of_the_function_that_raised() -> None:
    """The function's own frame, below lowwater's: where it raised, or called what raised (here
    ``int``). A traceback's innermost frame would be in the library, not in the user's code."""
    from lowwater.api import CollectionSource, StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy

    def parse(e: dict[str, Any]) -> dict[str, Any]:
        return {**e, "v": int(e["v"])}

    env = StreamExecutionEnvironment()
    (env.from_source(CollectionSource([[{"ts": 1, "v": "1"}, {"ts": 2, "v": "two"}]]),
                     WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
     .map(parse).collect())
    with pytest.raises(UserFunctionError) as info:
        env.execute()
    line = parse.__code__.co_firstlineno + 1
    assert str(info.value).endswith(f"last completed batch. It raised at {__file__} line {line}, in parse.")
    assert "invalid literal for int()" in str(info.value)


@pytest.mark.parametrize("layout", ["one line", "lines", "in foreachBatch"])
def test_root_cause_of_kafka_data_loss_names_the_partition_and_offsets_and_the_hint_the_choices(layout: str) -> None:
    """Spark's KAFKA_DATA_LOSS message is several lines: its first ('Some data may have been lost
    ...;') was all a run said, without the topic partition and offsets of its 'Reason:'."""
    from lowwater.core.failures import hint_for, root_cause

    reason = "Could not read records in offset [5, 20) for topic partition clicks-1"
    # in foreachBatch, Spark's wrapper says first that a Python proxy raised, with a Reason: of its own
    wrapper = ("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch "
               "sink. Reason: An exception was raised by the Python Proxy. Return Message: Traceback (most recent "
               "call last):\n") if layout == "in foreachBatch" else ""
    text = (wrapper
            + "org.apache.spark.sql.streaming.StreamingQueryException: Query [id = 1] terminated with exception\n"
            "Caused by: org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost "
            "because they are not available in Kafka any more;\neither the data was aged out by Kafka or the topic "
            "may have been deleted before all the data in the\ntopic was processed. If you don't want your streaming "
            "query to fail on such cases, set the\nsource option failOnDataLoss to false.\n"
            + (f"Reason:\n{reason}\nwith consumer group g.\n" if layout == "lines" else f"Reason: {reason}\n")
            + "\tat org.apache.spark.sql.kafka010.KafkaExceptions$.couldNotReadOffsetRange(KafkaExceptions.scala:1)")
    assert root_cause(text).endswith(f"not available in Kafka any more: {reason}")
    hint = hint_for(text)
    assert hint is not None and "new checkpoint" in hint and "failOnDataLoss" in hint
    # what the CLI prints of the failed query's message (its line and hint): whole, the hint not cut short
    import contextlib
    import io

    from lowwater.cli import _error
    from lowwater.core.errors import QueryFailedError

    failed = QueryFailedError(f"the streaming query failed: {root_cause(text)}; hint: {hint}", Exception(text))
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert _error(failed, "run", verbose=False) == 2
    assert err.getvalue().strip().endswith(f"{reason}; hint: {hint}"), err.getvalue()

"""PyFlink-shaped code that a user porting a job writes: it works as in PyFlink, or is refused
when the pipeline is built, saying what to write; never a different meaning."""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.api import CollectionSource, OutputTag, StreamExecutionEnvironment
from lowwater.core.errors import ConfigurationError
from lowwater.core.time import Duration
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import ProcessWindowFunction, TumblingEventTimeWindows

RECORDS = [{"k": "a", "ts": 1000, "v": 1}, {"k": "a", "ts": 2000, "v": 2}, {"k": "b", "ts": 3000, "v": 5}]


def _windowed() -> tuple[StreamExecutionEnvironment, Any]:
    env = StreamExecutionEnvironment()
    stream = env.from_source(CollectionSource([RECORDS]),
                             WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
    return env, stream.key_by("k").window(TumblingEventTimeWindows.of(Duration.of_seconds(10)))


def test_a_window_function_that_yields_a_tag_and_a_value_writes_to_the_side_output() -> None:
    """PyFlink's ``yield output_tag, value`` in a ProcessWindowFunction, with ``context.window()``
    called as PyFlink's method: the pair reached the main output as a tuple, and the call failed
    at the first firing ("'TimeWindow' object is not callable")."""
    small = OutputTag("small")

    class Totals(ProcessWindowFunction):  # type: ignore[type-arg]
        def process(self, key: Any, context: Any, elements: Any) -> Any:
            total = sum(e["v"] for e in elements)
            if total < 5:
                yield small, f"{key}:{total}"
            yield key, total, context.window().start, context.window.end

    env, windowed = _windowed()
    out = windowed.process(Totals())
    main, side = out.collect(), out.get_side_output(small).collect()
    env.execute()
    assert sorted(main.results) == [("a", 3, 0, 10_000), ("b", 5, 0, 10_000)]
    assert side.results == ["a:3"]


def test_durations_in_fractions_of_a_unit_are_exact_or_refused() -> None:
    """``Duration.of_seconds(0.5)`` was ``int(0.5) * 1000``: 0 ms, a bound of no out-of-orderness."""
    assert Duration.of_seconds(0.5).millis == 500
    assert Duration.of_seconds(1.1).millis == 1100
    assert Duration.of_minutes(1.5).millis == 90_000
    assert Duration.of_seconds(10).millis == 10_000
    for bad in (0.0005, "5", True, float("inf")):
        with pytest.raises(ConfigurationError, match=r"Duration\.of_seconds"):
            Duration.of_seconds(bad)  # type: ignore[arg-type]


def test_a_tuple_position_as_a_built_in_aggregates_field_is_refused_when_built() -> None:
    """PyFlink's ``sum(2)``: it failed at the first element, "attribute name must be string"."""
    _, windowed = _windowed()
    with pytest.raises(ConfigurationError, match=r"sum\(2\): give the field's name"):
        windowed.sum(2)


def test_a_pyflink_output_type_or_function_object_is_refused_when_built() -> None:
    """``map(fn, Types.STRING())`` took the type as the operator's name without a word, and a
    ``MapFunction`` object failed at the first element, "object is not callable"."""
    class Upper:  # PyFlink's MapFunction shape
        def map(self, value: Any) -> Any:
            return value

    class StringType:
        pass

    env = StreamExecutionEnvironment()
    stream = env.from_source(CollectionSource([RECORDS]), WatermarkStrategy.for_bounded_out_of_orderness(0))
    with pytest.raises(ConfigurationError, match=r"operator's name, a string, got .*output_type has no counterpart"):
        stream.map(lambda e: e, StringType())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"map takes a function of the element, got Upper; for a PyFlink "
                                                  r"Upper, pass its method: \.map\(f\.map\)"):
        stream.map(Upper())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="filter takes a function"):
        stream.filter(5)  # type: ignore[arg-type]
    assert stream.map(Upper().map, "upper").transformation.name == "upper"


def test_name_after_an_operator_names_it_as_its_name_argument_does() -> None:
    """PyFlink's ``.map(f).name("parse")``: there was no ``name``, so ported code failed with an
    AttributeError before it ran."""
    from lowwater.core.errors import UserFunctionError

    def parse(e: dict[str, Any]) -> dict[str, Any]:
        if e["v"] == 5:
            raise ValueError("five")
        return e

    env = StreamExecutionEnvironment()
    stream = env.from_source(CollectionSource([RECORDS]),
                             WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts"))
    named = stream.map(parse).name("parse amounts")
    assert named.transformation.name == "parse amounts"
    named.collect()
    with pytest.raises(UserFunctionError, match=r"map 'parse amounts' \(\S*parse\) raised ValueError: five"):
        env.execute()
    with pytest.raises(ConfigurationError, match=r"operator's name, a string"):
        stream.map(parse).name(3)  # type: ignore[arg-type]

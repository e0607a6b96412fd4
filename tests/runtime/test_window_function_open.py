"""A ``ProcessWindowFunction``'s ``open(runtime_context)``, PyFlink's ``Function.open``: called once
before the operator first uses the function. Until session 58 it was never called, so what it set
up was missing at the first firing, and the failure blamed ``process`` (a user probe)."""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.api import StreamExecutionEnvironment, ValueStateDescriptor
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows, TumblingEventTimeWindows
from lowwater.core.windows.functions import ProcessWindowFunction

ELEMENTS = [{"k": "a", "ts": 1000, "v": 1}, {"k": "a", "ts": 2000, "v": 2}, {"k": "b", "ts": 5000, "v": 3}]


class Labelled(ProcessWindowFunction[Any, Any]):
    def __init__(self) -> None:
        self.opened = 0

    def open(self, runtime_context: Any) -> None:
        self.opened += 1
        self.label = f"opened by {runtime_context.get_task_name()}"

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield self.label, self.opened, key, context.window.start, sum(e["v"] for e in elements)


class WithKeyedState(ProcessWindowFunction[Any, Any]):
    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield key


def _run(function: ProcessWindowFunction[Any, Any], assigner: Any) -> list[Any]:
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")
    sink = (env.from_collection(ELEMENTS).assign_timestamps_and_watermarks(strategy).key_by("k")
            .window(assigner).process(function).collect())
    env.execute()
    return sorted(sink.results)


@pytest.mark.parametrize("assigner", [TumblingEventTimeWindows.of(10_000), EventTimeSessionWindows.with_gap(500)])
def test_a_process_window_function_is_opened_once_before_its_first_firing(assigner: Any) -> None:
    function = Labelled()
    got = _run(function, assigner)
    assert [row[2:] for row in got] == ([("a", 0, 3), ("b", 0, 3)] if isinstance(assigner, TumblingEventTimeWindows)
                                        else [("a", 1000, 1), ("a", 2000, 2), ("b", 5000, 3)])
    assert {row[1] for row in got} == {1} and function.opened == 1
    assert {row[0] for row in got} == {"opened by window operator"}


def test_keyed_state_from_a_window_functions_runtime_context_is_refused_saying_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match="a ProcessWindowFunction has no keyed state in lowwater "
                                                 r"\(asked for 'count'\): keep what a window needs"):
        _run(WithKeyedState(), TumblingEventTimeWindows.of(10_000))

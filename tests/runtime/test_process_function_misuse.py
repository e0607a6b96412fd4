"""Process functions used as a user might by mistake fail where the mistake is, not later.

A side output is found by its OutputTag: a name alone is refused where it is given.

``ctx.output("late_orders", v)`` reached no side output, and ``get_side_output(OutputTag(
"late_orders"))`` got nothing: the value was lost and the account balanced (a user probe,
session 57). ``get_side_output("late_orders")`` failed with ``'str' object has no attribute
'name'``.

Keyed state in ``open()``, where there is no current key, is refused as Flink refuses it ("No key
set"): a write there went under the key ``None``, and the job failed later, far from the cause."""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.api import OutputTag, StreamExecutionEnvironment
from lowwater.core.errors import ConfigurationError, UserFunctionError
from lowwater.core.process import KeyedProcessFunction
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import ProcessWindowFunction, TumblingEventTimeWindows

ELEMENTS = [{"k": "a", "ts": 1000, "v": 1}, {"k": "a", "ts": 2000, "v": 2}]

SAYS = r"ctx.output takes an OutputTag, got str 'late_orders': pass OutputTag\('late_orders'\)"


def _keyed(env: StreamExecutionEnvironment) -> Any:
    return (env.from_collection(ELEMENTS)
            .assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(0)
                                              .with_timestamp_assigner("ts"))
            .key_by("k"))


def test_a_process_function_s_output_to_a_name_fails_naming_the_function_and_the_tag_to_pass() -> None:
    class Late(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.output("late_orders", value)
            yield value["v"]

    env = StreamExecutionEnvironment()
    stream = _keyed(env).process(Late())
    stream.collect()
    stream.get_side_output(OutputTag("late_orders")).collect()
    with pytest.raises(UserFunctionError, match="process function of .*" + SAYS):
        env.execute()


def test_a_process_window_function_s_output_to_a_name_fails_with_the_tag_to_pass() -> None:
    class Totals(ProcessWindowFunction):  # type: ignore[type-arg]
        def process(self, key: Any, context: Any, elements: Any) -> Any:
            context.output("late_orders", key)
            yield sum(e["v"] for e in elements)

    env = StreamExecutionEnvironment()
    _keyed(env).window(TumblingEventTimeWindows.of(10_000)).process(Totals()).collect()
    with pytest.raises(UserFunctionError, match="window function of .*" + SAYS):
        env.execute()


def test_get_side_output_of_a_name_is_a_configuration_error_with_the_tag_to_pass() -> None:
    env = StreamExecutionEnvironment()
    class Nothing(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value

    stream = _keyed(env).process(Nothing())
    with pytest.raises(ConfigurationError, match=r"get_side_output takes an OutputTag, got str 'late_orders': "
                                                 r"pass OutputTag\('late_orders'\)"):
        stream.get_side_output("late_orders")  # type: ignore[arg-type]


def test_keyed_state_in_open_fails_there_as_flink_s_no_key_set() -> None:
    from lowwater.core.process import ValueStateDescriptor

    class StartAt100(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.total = runtime_context.get_state(ValueStateDescriptor("total"))
            self.total.update(100)

        def process_element(self, value: Any, ctx: Any) -> Any:
            self.total.update(self.total.value() + value["v"])
            yield self.total.value()

    env = StreamExecutionEnvironment()
    _keyed(env).process(StartAt100()).collect()
    with pytest.raises(UserFunctionError, match=r"process function of .* \(open\) raised RuntimeError: No key set: "
                                                r"the keyed state 'total' is read or written outside a keyed context"):
        env.execute()


@pytest.mark.parametrize("returned", ["a:1", {"k": "a", "v": 1}, 7])
def test_a_process_function_that_returns_a_text_a_dict_or_a_number_fails_saying_to_yield(returned: Any) -> None:
    """Iterated, a returned text made an output per character and a dict one per field name, without
    a word; a number failed with ``'int' object is not iterable``. A tuple or a list is outputs, as
    in PyFlink."""
    class Returns(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            return returned

    env = StreamExecutionEnvironment()
    _keyed(env).process(Returns()).collect()
    with pytest.raises(UserFunctionError, match=rf"process_element returned {type(returned).__name__} .*, not "
                                                r"outputs: a process function yields each output"):
        env.execute()


def test_a_returned_tuple_or_list_is_its_outputs_as_in_pyflink() -> None:
    class Returns(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            return (value["k"], value["v"]) if value["v"] == 1 else [value["v"]]

    env = StreamExecutionEnvironment()
    out = _keyed(env).process(Returns()).collect()
    env.execute()
    assert out.results == ["a", 1, 2]

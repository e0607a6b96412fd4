"""PyFlink idioms a port brings along (a user probe, session 58): ``MapState``'s item syntax,
``ds1.key_by(k1).connect(ds2.key_by(k2))``, ``OutputTag(name, type_info)``; and the refusal of a
``ReduceFunction`` or ``KeySelector`` object, saying to pass its method, as for a ``MapFunction``."""

from __future__ import annotations

from typing import Any

import pytest

from lowwater.api import (
    CollectionSource,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    MapStateDescriptor,
    OutputTag,
    StreamExecutionEnvironment,
)
from lowwater.core.errors import ConfigurationError
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows

BY_TS = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner("ts")


class Seen(KeyedProcessFunction):
    """Counts each value in a MapState with PyFlink's item syntax."""

    def open(self, runtime_context: Any) -> None:
        self.seen = runtime_context.get_map_state(MapStateDescriptor("seen", None, None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        v = value["v"]
        self.seen[v] = (self.seen[v] or 0) + 1 if v in self.seen else 1
        if v == "drop":
            del self.seen[v]
        yield ctx.get_current_key(), sorted((k, self.seen[k]) for k in self.seen)


def test_map_state_takes_pyflinks_item_syntax() -> None:
    env = StreamExecutionEnvironment()
    rows = [{"k": "a", "ts": i, "v": v} for i, v in enumerate(["x", "y", "x", "drop"])]
    out = env.from_source(CollectionSource([rows]), BY_TS).key_by("k").process(Seen()).collect()
    env.execute()
    assert [r[1] for r in out.results] == [[("x", 1)], [("x", 1), ("y", 1)], [("x", 2), ("y", 1)],
                                           [("x", 2), ("y", 1)]]


class Join(KeyedCoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield "order", ctx.get_current_key()

    def process_element2(self, value: Any, ctx: Any) -> Any:
        yield "payment", ctx.get_current_key()


def test_two_keyed_streams_connect_as_pyflinks_do() -> None:
    env = StreamExecutionEnvironment()
    orders = env.from_source(CollectionSource([[{"id": "o1", "ts": 1}]]), BY_TS)
    payments = env.from_source(CollectionSource([[{"order": "o1", "ts": 2}]]), BY_TS)
    out = orders.key_by("id").connect(payments.key_by("order")).process(Join()).collect()
    env.execute()
    assert sorted(out.results) == [("order", "o1"), ("payment", "o1")]
    with pytest.raises(ConfigurationError, match="a keyed stream connects to another keyed stream, got DataStream"):
        orders.key_by("id").connect(payments)  # type: ignore[arg-type]


def test_an_output_tag_takes_pyflinks_type_and_is_its_name() -> None:
    assert OutputTag("late", "Types.ROW(...)") == OutputTag("late") and repr(OutputTag("late", 1)) == \
        "OutputTag(name='late')"


class Adder:
    def reduce(self, a: Any, b: Any) -> Any:
        return a + b


class ByUser:
    def get_key(self, value: Any) -> Any:
        return value["user"]


def test_a_reduce_function_or_key_selector_object_is_refused_naming_its_method() -> None:
    env = StreamExecutionEnvironment()
    stream = env.from_source(CollectionSource([[{"user": "a", "ts": 1, "v": 1}]]), BY_TS)
    with pytest.raises(ConfigurationError, match=r"pass its method: \.reduce\(f\.reduce\)"):
        stream.key_by("user").window(TumblingEventTimeWindows.of(10)).reduce(Adder())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"pass its method: \.key_by\(k\.get_key\)"):
        stream.key_by(ByUser())  # type: ignore[arg-type]

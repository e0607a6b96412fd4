"""The reference runtime: the executable specification of lowwater's semantics.

It runs a pipeline in-process over partitioned input with explicit micro-batch
boundaries and an injected clock:

1. Each source batch's records go through the pipeline in arrival order. The window
   operator judges them against the watermark it holds, the one combined at the end
   of the previous batch.
2. At the end of the batch, in topological order, every lane's generator emits
   (periodic emission), each operator combines its input lanes once (the minimum over
   non-idle lanes, never regressing), fires what that watermark triggers, and then
   forwards it.
3. After a bounded input ends, a ``MAX`` watermark fires every remaining window.

Use it to unit-test pipelines, as PySpark's ``TwsTester`` is used: the Spark engine
must give the same results.
"""

from __future__ import annotations

from typing import Any

from lowwater.api.environment import StreamExecutionEnvironment
from lowwater.api.transformations import (
    AssignTransformation,
    CoTransformation,
    OneInputTransformation,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
    WindowTransformation,
)
from lowwater.core.clock import Clock, ManualClock, SystemClock
from lowwater.core.errors import PipelineError
from lowwater.core.time_characteristic import TimeCharacteristic
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.runtime.nodes import (
    AssignerNode,
    CoNode,
    Node,
    SideOutputNode,
    SinkNode,
    SourceNode,
    StatelessNode,
    UnionNode,
    WindowNode,
)
from lowwater.runtime.result import BatchMetrics, JobResult

__all__ = ["ReferenceRuntime"]


class ReferenceRuntime:
    """Runs a :class:`StreamExecutionEnvironment`'s pipelines in-process.

    Parameters
    ----------
    clock:
        Processing time. A batch that states its processing time sets a manual clock
        to it; otherwise the given clock is read (the system clock by default).
    max_batches:
        Stop after this many batches (for unbounded sources).
    """

    def __init__(self, clock: Clock | None = None, max_batches: int | None = None) -> None:
        self.user_clock = clock
        self.clock = clock if isinstance(clock, ManualClock) else ManualClock(0)
        self.max_batches = max_batches
        self.nodes: list[Node] = []
        """The compiled operators of the last ``execute`` (for inspection after a failure)."""

    def execute(self, env: StreamExecutionEnvironment, job_name: str = "lowwater job") -> JobResult:
        order = self.nodes = self._compile(env)
        sources = [n for n in order if isinstance(n, SourceNode)]
        windows = [n for n in order if isinstance(n, WindowNode)]
        fallback: Clock = self.user_clock or SystemClock()

        for n in order:
            n.on_start()
        iterators = [s.source.batches() for s in sources]
        metrics: list[BatchMetrics] = []
        batch_id = 0
        while self.max_batches is None or batch_id < self.max_batches:
            batches = [next(it, None) for it in iterators]
            if all(b is None for b in batches):
                break
            times = [b.processing_time_ms for b in batches if b is not None and b.processing_time_ms is not None]
            if times:
                self.clock.set(max(times))
            elif fallback is not self.clock:
                self.clock.set(fallback.now_ms())
            rows = 0
            for s, b in zip(sources, batches, strict=True):
                if b is not None:
                    s.feed(b)
                    rows += s.rows_in_batch
            for n in order:
                n.on_batch_end(batch_id, False)
            metrics.append(self._metrics(batch_id, rows, False, windows))
            batch_id += 1
        if all(s.source.bounded for s in sources) and (self.max_batches is None or batch_id < self.max_batches):
            for n in order:
                n.on_batch_end(batch_id, True)
            metrics.append(self._metrics(batch_id, 0, True, windows))
        for n in order:
            if isinstance(n, SinkNode):
                n.sink.close()
        history = {self._name(w): list(w.exchange.history) for w in windows}
        return JobResult(job_name, metrics, history)

    def _name(self, n: Node) -> str:
        return f"{n.name}#{n.node_id}"

    def _metrics(self, batch_id: int, rows: int, end: bool, windows: list[WindowNode]) -> BatchMetrics:
        return BatchMetrics(
            batch_id, self.clock.now_ms(), rows, end, {self._name(w): w.metrics() for w in windows}
        )

    # -- compiling the graph ----------------------------------------------------------
    def _compile(self, env: StreamExecutionEnvironment) -> list[Node]:
        nodes: dict[int, Node] = {}
        order: list[Node] = []

        def add(node: Node) -> Node:
            order.append(node)
            return node

        def link(up: Node, down: Node, index: int = 0) -> None:
            up.outputs.append((down, index))

        def build(t: Transformation) -> Node:
            if t.id in nodes:
                return nodes[t.id]
            ins = [build(i) for i in t.inputs]
            node: Node
            if isinstance(t, SourceTransformation):
                node = add(SourceNode(t.id, t.name, t.source))
                strategy = t.strategy
                if strategy is None and env.time_characteristic is TimeCharacteristic.INGESTION_TIME:
                    strategy = WatermarkStrategy.for_ingestion_time()
                if strategy is not None:
                    assigner = add(AssignerNode(-t.id, f"{t.name} watermarks", strategy, self.clock))
                    link(node, assigner)
                    node = assigner
            elif isinstance(t, OneInputTransformation):
                node = add(StatelessNode(t.id, t.name, t.kind, t.fn))
                link(ins[0], node)
            elif isinstance(t, AssignTransformation):
                node = add(AssignerNode(t.id, t.name, t.strategy, self.clock))
                link(ins[0], node)
            elif isinstance(t, WindowTransformation):
                node = add(WindowNode(t.id, t, self.clock))
                link(ins[0], node)
            elif isinstance(t, SideOutputTransformation):
                up = ins[0]
                if not isinstance(up, WindowNode):
                    raise PipelineError("get_side_output is only available on a window operator's output")
                node = add(SideOutputNode(t.id, t.name))
                up.side_outputs.setdefault(t.tag, []).append((node, 0))
            elif isinstance(t, UnionTransformation):
                node = add(UnionNode(t.id, t.name))
                for i in ins:
                    link(i, node)
            elif isinstance(t, CoTransformation):
                node = add(CoNode(t.id, t.name, t.fn1, t.fn2, t.flat))
                link(ins[0], node, 0)
                link(ins[1], node, 1)
            elif isinstance(t, SinkTransformation):
                node = add(SinkNode(t.id, t.name, t.sink))
                link(ins[0], node)
            else:
                raise PipelineError(f"the reference runtime cannot run {type(t).__name__}")
            nodes[t.id] = node
            return node

        for sink in env.sinks:
            build(sink)
        return order


def run(env: StreamExecutionEnvironment, **kwargs: Any) -> JobResult:
    """Shorthand for ``ReferenceRuntime(**kwargs).execute(env)``."""
    return ReferenceRuntime(**kwargs).execute(env)


"""A compiled pipeline that advances one micro-batch at a time.

The reference runtime drives it over a source's batches; the Spark engine's general
path drives it with each Spark micro-batch. Its state pickles (with cloudpickle, for
user lambdas), so a runtime can version it by batch id.
"""

from __future__ import annotations

from typing import Any

from lowwater.core.clock import ManualClock
from lowwater.core.errors import PipelineError
from lowwater.core.time import MAX_TIMESTAMP
from lowwater.core.time_characteristic import TimeCharacteristic
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.graph import Pipeline, PipelineLike, as_pipeline
from lowwater.graph.sources import SourceBatch
from lowwater.graph.transformations import (
    AssignTransformation,
    CoTransformation,
    KeyedCoProcessTransformation,
    KeyedProcessTransformation,
    OneInputTransformation,
    SideOutputTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
    UnionTransformation,
    WindowTransformation,
)
from lowwater.runtime.nodes import (
    AssignerNode,
    CoNode,
    DeadLetters,
    KeyedProcessNode,
    Node,
    SideOutputNode,
    SinkNode,
    SourceNode,
    StatelessNode,
    UnionNode,
    WindowNode,
    _SingleLaneNode,
)
from lowwater.runtime.result import BatchMetrics

__all__ = ["CompiledJob"]


class CompiledJob:
    """The operators of a pipeline, in topological order, with a manual clock."""

    def __init__(self, pipeline: PipelineLike, clock: ManualClock | None = None) -> None:
        self.clock = clock or ManualClock(0)
        self.nodes = _compile(as_pipeline(pipeline), self.clock)
        self.sources = [n for n in self.nodes if isinstance(n, SourceNode)]
        self.windows = [n for n in self.nodes if isinstance(n, WindowNode)]
        self.operators: list[WindowNode | KeyedProcessNode] = [
            n for n in self.nodes if isinstance(n, WindowNode | KeyedProcessNode)
        ]
        """The keyed operators (windows and process functions): their metrics and watermarks."""
        self.sinks = [n for n in self.nodes if isinstance(n, SinkNode)]
        self.dead = DeadLetters()
        for n in self.nodes:
            n.dead = self.dead
        self.direct = _direct(self.nodes)
        """One keyed operator (a window or a process function) fed straight from the sources (no
        map, filter or flat_map on the way): then every source row is windowed (processed), late,
        dead-lettered or unassigned."""
        self.started = False
        self.finished = False
        """:meth:`finish` ran: the input ended, and processing time stays where it left it. A step
        after it (records read after the end, which are late) does not move the clock, so a
        processing-time timer or window still pending at the end never fires, as in Flink."""
        self.ended: set[int] = set()
        self.kept: dict[str, Any] = {}
        """Data the runtime hosting the job keeps with its state (restored with it): the Spark
        engine's general path keeps its DataFrame outputs' schemas here."""

    def start(self) -> None:
        for n in self.nodes:
            n.on_start()
        self.started = True

    def step(self, batch_id: int, batches: list[SourceBatch | None], processing_time_ms: int) -> BatchMetrics:
        """Feed one micro-batch per source, then emit watermarks at its end."""
        if not self.started:
            self.start()
        if not self.finished:
            self.clock.set(processing_time_ms)
        self.dead.new_batch()
        rows = 0
        live = [(s, b) for s, b in zip(self.sources, batches, strict=True) if b is not None]
        if any(b.arrival is not None for _, b in live):  # several sources: in arrival order
            merged = sorted(
                ((pos, k, j, s) for k, (s, b) in enumerate(live)
                 for j, pos in enumerate(b.arrival if b.arrival is not None else range(len(b.items)))),
                key=lambda t: (t[0], t[1], t[2]),
            )
            for s, _ in live:
                s.begin_batch()
            for _, k, j, s in merged:
                s.feed_item(live[k][1].items[j])
        else:
            for s, b in live:
                s.feed(b)
        rows = sum(s.rows_in_batch for s, _ in live)
        for i, (s, maybe) in enumerate(zip(self.sources, batches, strict=True)):
            if maybe is None and i not in self.ended and s.source.finishes_alone:
                self.ended.add(i)
                s.end()
        for n in self.nodes:
            n.on_batch_end(batch_id, False)
        return self.metrics(batch_id, rows, False)

    def finish(self, batch_id: int) -> BatchMetrics:
        """End of bounded input: a MAX watermark fires every remaining window."""
        if not self.started:
            self.start()
        self.dead.new_batch()
        for n in self.nodes:
            n.on_batch_end(batch_id, True)
        self.finished = True
        return self.metrics(batch_id, 0, True)

    def metrics(self, batch_id: int, rows: int, end: bool) -> BatchMetrics:
        return BatchMetrics(batch_id, self.clock.now_ms(), rows, end,
                            {self.name(w): w.metrics() for w in self.operators},
                            rows_dead_lettered=len(self.dead.rows))

    def name(self, n: Node) -> str:
        """The keyed operator ``n``'s name in metrics and watermark histories: its own, with its place
        among the job's keyed operators (``window aggregate#2``) where two share it. The same in
        every process that builds the pipeline, so a restarted job's lines name the operators the
        checkpoint's older lines did (until session 46 the number was a transformation id, which
        counts every transformation the process had made: ``#4638`` in a notebook)."""
        names = [o.name for o in self.operators]
        return n.name if names.count(n.name) == 1 else f"{n.name}#{self.operators.index(n) + 1}"  # type: ignore[arg-type]

    def bound_histories(self) -> None:
        """Keep only the last combined watermark of each operator input, not every one: for
        engines that run for months (the reference runtime keeps them for its result)."""
        for n in self.nodes:
            for ex in getattr(n, "exchanges", ()):
                ex.advanced_once = ex.advanced_once or bool(ex.history)
                ex.keep_history, ex.history = False, ex.history[-1:]
            if isinstance(n, _SingleLaneNode):
                n.bounded_history = True
                n.watermark_history = n.watermark_history[-1:]

    def watermark_history(self) -> dict[str, list[int]]:
        return {self.name(w): list(w.watermark_history) for w in self.operators}

    def restore_from(self, old: CompiledJob) -> None:
        """Take the state of ``old`` (unpickled from a checkpoint) into this job's operators,
        which were built from the current pipeline: a fixed function takes effect."""
        if [type(n) for n in old.nodes] != [type(n) for n in self.nodes]:
            from lowwater.core.errors import ConfigurationError

            raise ConfigurationError(
                "checkpoint_location", "the checkpoint's operators do not match this pipeline's; "
                "use a new checkpoint location, or run the pipeline that made it",
            )
        for new, was in zip(self.nodes, old.nodes, strict=True):
            new.restore(was)
        self.clock.set(old.clock.now_ms())
        old_dead = getattr(old, "dead", None)
        self.dead.count = old_dead.count if old_dead is not None else 0
        self.started = old.started
        finished = getattr(old, "finished", None)
        if finished is None:  # a snapshot from before session 62 has none: the end left every operator at MAX
            operators = [n for n in old.nodes if isinstance(n, _SingleLaneNode)]
            finished = bool(operators) and all(n.current_watermark == MAX_TIMESTAMP for n in operators)
        self.finished = finished
        self.ended = set(old.ended)
        self.kept = dict(getattr(old, "kept", {}))

    # -- snapshots (sinks hold external resources and are not part of state) --------------
    def detach_sinks(self) -> list[Any]:
        sinks = [n.sink for n in self.sinks]
        for n in self.sinks:
            n.sink = None  # type: ignore[assignment]
        return sinks

    def attach_sinks(self, sinks: list[Any]) -> None:
        for n, s in zip(self.sinks, sinks, strict=True):
            n.sink = s


def _direct(nodes: list[Node]) -> bool:
    """Exactly one keyed operator (a window or a process function, of one input or two); only
    sources, assigners and unions before it; and one path from each source to it (a stream unioned
    with itself carries each record twice). Then every record read reaches it or is dead-lettered
    on the way, and the job's accounting covers every record (a process function's too: until
    session 39 it counted only the records that reached the function, so a record dead-lettered at
    its source for its timestamp was in no term of the balance)."""
    operators = [n for n in nodes if isinstance(n, WindowNode | KeyedProcessNode)]
    if len(operators) != 1:
        return False
    op = operators[0]
    leads = {id(op)}  # the nodes with a path to the operator
    for n in reversed(nodes):
        if any(id(down) in leads for down, _ in n.outputs):
            leads.add(id(n))
    for source in (n for n in nodes if isinstance(n, SourceNode)):
        paths = {id(source): 1}
        for n in nodes:  # topological order
            count = paths.get(id(n), 0)
            if not count or n is op or id(n) not in leads:
                continue
            if not isinstance(n, SourceNode | AssignerNode | UnionNode):
                return False
            for down, _ in n.outputs:
                paths[id(down)] = paths.get(id(down), 0) + count
        if paths.get(id(op), 0) != 1:
            return False
    return True


def _compile(pipeline: Pipeline, clock: ManualClock) -> list[Node]:
    nodes: dict[int, Node] = {}
    order: list[Node] = []

    def add(node: Node) -> Node:
        if hasattr(node, "out_lane"):  # an operator's lane: by position, the same in every process
            node.out_lane = ("op", len(order))
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
            node = add(SourceNode(t.id, t.name, t.source, index=sum(isinstance(n, SourceNode) for n in order)))
            strategy = t.strategy
            if strategy is None and pipeline.time_characteristic is TimeCharacteristic.INGESTION_TIME:
                strategy = WatermarkStrategy.for_ingestion_time()
            if strategy is not None:
                assigner = add(AssignerNode(-t.id, f"{t.name} watermarks", strategy, clock))
                link(node, assigner)
                node = assigner
        elif isinstance(t, OneInputTransformation):
            node = add(StatelessNode(t.id, t.name, t.kind, t.fn))
            link(ins[0], node)
        elif isinstance(t, AssignTransformation):
            node = add(AssignerNode(t.id, t.name, t.strategy, clock))
            link(ins[0], node)
        elif isinstance(t, WindowTransformation):
            node = add(WindowNode(t.id, t, clock))
            link(ins[0], node)
        elif isinstance(t, SideOutputTransformation):
            up = ins[0]
            if not isinstance(up, WindowNode | KeyedProcessNode):
                raise PipelineError("get_side_output is only available on a window or process operator's output")
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
        elif isinstance(t, KeyedProcessTransformation):
            node = add(KeyedProcessNode(t.id, t.name, t.function, [t.key_selector], clock))
            link(ins[0], node)
        elif isinstance(t, KeyedCoProcessTransformation):
            node = add(KeyedProcessNode(t.id, t.name, t.function, [t.key_selector1, t.key_selector2], clock))
            link(ins[0], node, 0)
            link(ins[1], node, 1)
        elif isinstance(t, SinkTransformation):
            node = add(SinkNode(t.id, t.name, t.sink))
            link(ins[0], node)
        else:
            raise PipelineError(f"the reference runtime cannot run {type(t).__name__}")
        nodes[t.id] = node
        return node

    for sink in pipeline.sinks:
        build(sink)
    labels = pipeline.source_labels()  # whose partition and offset a dead letter's are
    for n in order:
        if isinstance(n, SourceNode):
            n.source_name = labels.get(n.node_id)
    return order

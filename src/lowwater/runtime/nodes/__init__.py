"""The reference runtime's operators, one node kind per module. Records are pushed;
watermarks move at batch ends.

Before the first exchange every source partition is a *lane* with its own watermark,
like a parallel Flink subtask. Operators that need one input (windows, two-input
operators, sinks) combine their lanes in an exchange (:class:`~lowwater.runtime.union_input.UnionInput`),
once per batch end.

Every name stays importable from here, the private ones included: other modules use them,
and general-path checkpoints pickled before this package was split name their classes here.
"""

from lowwater.runtime.nodes.assigner import AssignerNode, _LaneOutput, _LaneWatermarking
from lowwater.runtime.nodes.co import CoNode
from lowwater.runtime.nodes.dead_letters import DeadLetters
from lowwater.runtime.nodes.keyed_process import KeyedProcessNode
from lowwater.runtime.nodes.node import Node, _fn_name, _stateless_label
from lowwater.runtime.nodes.side_output import SideOutputNode
from lowwater.runtime.nodes.single_lane import _lane_labels, _SingleLaneNode
from lowwater.runtime.nodes.sink import SinkNode
from lowwater.runtime.nodes.source import SourceNode
from lowwater.runtime.nodes.stateless import StatelessNode
from lowwater.runtime.nodes.union import UnionNode
from lowwater.runtime.nodes.window import WindowNode

__all__ = [
    "AssignerNode", "CoNode", "DeadLetters", "KeyedProcessNode", "Node", "SideOutputNode", "SinkNode", "SourceNode",
    "StatelessNode", "UnionNode", "WindowNode", "_LaneOutput", "_LaneWatermarking", "_SingleLaneNode", "_fn_name",
    "_lane_labels", "_stateless_label",
]

"""The keyed process operator's node: now :mod:`lowwater.runtime.nodes.keyed_process`; re-exported
here (general-path checkpoints pickled before the move name it here)."""

from lowwater.runtime.nodes.keyed_process import KeyedProcessNode

__all__ = ["KeyedProcessNode"]

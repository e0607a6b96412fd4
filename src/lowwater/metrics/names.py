"""How a batch's metrics name partitions, on every runtime.

A processor keys its per-partition figures by lane: the partition's number in a job of one
source, ``index:number`` in a job of several, ``index`` being the source's place in the
pipeline (:attr:`~lowwater.graph.pipeline.Pipeline.sources`, the same in every process). The
metrics name them for people: ``label:name``, where ``label`` is the source's label in its dead
letters and late rows (:meth:`~lowwater.graph.pipeline.Pipeline.source_labels`: its name, or
``name#k``) and ``name`` is the partition's own name where the source gives one
(``partition_name``: ``views-1`` for a Kafka source of several topics), else its number.

    >>> names = PartitionNames.of([("clicks", None), ("orders", None)])
    >>> names("1:0"), names("clicks:0"), names("7")
    ('orders:0', 'clicks:0', '7')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PartitionNames", "named_partitions"]


def _names_partitions(source: Any) -> bool:
    """Whether ``source`` names its partitions (overrides ``partition_name``)."""
    owner = next((c for c in type(source).__mro__ if "partition_name" in vars(c)), None)
    # SparkSource's own is the number itself (found without importing Spark: the reference runtime)
    return owner is not None and (owner.__module__, owner.__name__) != ("lowwater.spark.source_base", "SparkSource")


class PartitionNames:
    """``names(key)``: a processor's key for a partition (module docstring) as the metrics name it."""

    def __init__(self, sources: Sequence[tuple[str, Any]]) -> None:
        self.labels = [label for label, _ in sources]
        self.sources = [source for _, source in sources]
        self.own = [_names_partitions(source) for source in self.sources]

    @classmethod
    def of(cls, sources: Sequence[tuple[str, Any]]) -> PartitionNames | None:
        """For ``sources`` (each one's label and source, in the pipeline's order); ``None`` where
        the keys are the names already: one source, which numbers its partitions."""
        names = cls(sources)
        return names if len(sources) > 1 or any(names.own) else None

    def __call__(self, key: str) -> str:
        if len(self.sources) > 1:
            index, sep, number = key.partition(":")
            if not sep or not index.isdigit() or int(index) >= len(self.sources):
                return key  # not a processor's key (named already)
            return f"{self.labels[int(index)]}:{self._own(int(index), number)}"
        return self._own(0, key)

    def _own(self, index: int, number: str) -> str:
        if not self.own[index]:
            return number
        try:
            return str(self.sources[index].partition_name(int(number)))
        except ValueError:  # not a number: named already
            return number

    def sample_partition(self, label: str | None, partition: Any) -> str:
        """A dead-letter sample's partition, named by the source whose ``label`` the sample carries
        (a job of several sources) or by the only one."""
        if len(self.sources) == 1:
            return self(str(partition))
        if label not in self.labels:  # no label (or not this job's): as it is
            return str(partition)
        return self._own(self.labels.index(label), str(partition))


def named_partitions(metrics: Mapping[str, Any], names: PartitionNames) -> dict[str, Any]:
    """``metrics`` with its partitions named by ``names``: the keys of ``partition_watermarks`` and
    ``rows_late_by_partition``, ``idle_partitions`` and the dead-letter sample's ``partition``
    (whose ``source``, in a job of several sources, is its source's label)."""
    out = dict(metrics)
    for key in ("partition_watermarks", "rows_late_by_partition"):
        if out.get(key):
            out[key] = {names(str(p)): v for p, v in out[key].items()}
    if out.get("idle_partitions"):
        out["idle_partitions"] = sorted(names(str(p)) for p in out["idle_partitions"])
    sample = out.get("dead_letter_sample")
    if sample and sample.get("partition") is not None:
        named = names.sample_partition(sample.get("source"), sample["partition"])
        if named != str(sample["partition"]):  # a number stays a number
            out["dead_letter_sample"] = {**sample, "partition": named}
    return out

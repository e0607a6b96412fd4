"""The base of every source the Spark engine reads, and the columns they all yield.

============== ======= ==========================================================
``_partition``  int     the source partition (a Kafka ``(topic, partition)``, a log dir)
``_offset``     long    the record's position in its partition, or null
``_source_ts``  long    the source timestamp in epoch ms (Kafka's record timestamp), or null
``_seq``        long    the arrival order within the micro-batch, or null for (partition, offset)
*fields*        any     the element's fields, as top-level columns
============== ======= ==========================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowwater.graph.sources import Source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["STANDARD_COLUMNS", "SparkSource"]

STANDARD_COLUMNS = ("_partition", "_offset", "_source_ts", "_seq")


class SparkSource(Source):
    """A source the Spark engine can read: ``spark_stream`` returns the standard columns."""

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        raise NotImplementedError

    @property
    def finishes_alone(self) -> bool:
        """No: on Spark no stream finishes before the end of input (the log, a topic or a
        directory may grow), so a source whose data has run out holds a union back, or goes idle
        as its strategy says, until every source ends together. The reference runtime reads it so
        too, where it sent MAX for it alone and gave other results than Spark."""
        return False

    def fields(self) -> list[str]:
        """The element's field names."""
        raise NotImplementedError

    def check_before_run(self) -> None:
        """Raise :class:`ConfigurationError` for what would fail the run or every record.

        The engine calls it before Spark starts; by default there is nothing to check."""

    def partition_name(self, partition: int) -> str:
        """How the metrics, ``lowwater run`` and ``lowwater status`` name ``partition`` (the number in
        the ``_partition`` column): the number itself by default; ``topic-partition`` for a Kafka
        source of several topics, whose numbers are ``index * partitions_per_topic + partition``."""
        return str(partition)

    def identity(self) -> str:
        """What a checkpoint's state is bound to beyond the fields' names (part of the pipeline's
        fingerprint, :meth:`~lowwater.graph.pipeline.Pipeline.fingerprint`): for a Kafka source its
        topics in order, which number its partitions, each with its watermark. Empty by default."""
        return ""

"""How a batch's metrics name partitions where a source names its own (``topic-partition`` for a
Kafka source of several topics): the Spark engine's ``partition_namer`` and ``named_partitions``."""

from __future__ import annotations

from typing import Any

from lowwater.spark.engine import named_partitions, partition_namer
from lowwater.spark.sources import PartitionedLogSource

FIELDS = [("user", "STRING")]


class _Topics(PartitionedLogSource):
    """A source that names its partitions as a Kafka source of two topics, 1000 apart, does
    (``KafkaShapedSource.partition_name``, tested on Spark in ``tests/spark/test_kafka_shaped.py``)."""

    def __init__(self) -> None:
        super().__init__("/nowhere", FIELDS)

    def partition_name(self, partition: int) -> str:
        topic, p = divmod(partition, 1000)
        return f"{['clicks', 'views'][topic]}-{p}"


def _numbered() -> PartitionedLogSource:
    return PartitionedLogSource("/nowhere", FIELDS)


def test_a_source_that_names_its_partitions_names_every_partition_figure() -> None:
    name = partition_namer({"kafka": _Topics()})
    assert name is not None
    metrics: dict[str, Any] = {
        "combined_watermark": 999,
        "partition_watermarks": {"0": 999, "1001": 1999},
        "idle_partitions": ["1001"],
        "rows_late_by_partition": {"1001": 3},
        "dead_letter_sample": {"reason": "missing key (user)", "partition": 1001, "offset": 7, "record": "{}"},
        "rows_in": 10,
    }
    assert named_partitions(metrics, name) == {
        "combined_watermark": 999,
        "partition_watermarks": {"clicks-0": 999, "views-1": 1999},
        "idle_partitions": ["views-1"],
        "rows_late_by_partition": {"views-1": 3},
        "dead_letter_sample": {"reason": "missing key (user)", "partition": "views-1", "offset": 7, "record": "{}"},
        "rows_in": 10,
    }
    assert metrics["partition_watermarks"] == {"0": 999, "1001": 1999}  # the processor's own, untouched
    assert named_partitions({}, name) == {}


def test_in_a_job_of_several_sources_each_keeps_its_label_and_names_its_own_partitions() -> None:
    name = partition_namer({"kafka": _Topics(), "files": _numbered()})
    assert name is not None
    assert name("kafka:1001") == "kafka:views-1"
    assert name("files:1001") == "files:1001"  # numbered by its source: as it was
    assert name("elsewhere:3") == "elsewhere:3"
    sample = {"reason": "r", "partition": 1001, "offset": 2}  # a sample names no source: its number stays
    assert named_partitions({"dead_letter_sample": sample}, name)["dead_letter_sample"]["partition"] == "1001"


def test_sources_that_number_their_partitions_change_nothing() -> None:
    assert partition_namer({"log": _numbered()}) is None
    assert partition_namer({"a": _numbered(), "b": _numbered()}) is None


def test_status_and_plot_list_partitions_by_source_or_topic_then_by_number() -> None:
    from lowwater.observe.fmt import partition_order

    names = ["10", "2", "views-0", "clicks-1", "clicks-0", "files:3", "files:12", "kafka:views-0", "0"]
    assert sorted(names, key=partition_order) == \
        ["0", "2", "10", "clicks-0", "clicks-1", "files:3", "files:12", "kafka:views-0", "views-0"]

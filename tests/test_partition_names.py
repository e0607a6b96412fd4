"""How a batch's metrics name partitions (:mod:`lowwater.metrics.names`): by their sources' labels in a
job of several sources, and where a source names its own (``topic-partition`` for a Kafka source of
several topics) by that name."""

from __future__ import annotations

from typing import Any

from lowwater.metrics.names import PartitionNames, named_partitions
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
    name = PartitionNames.of([("kafka", _Topics())])
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
    assert named_partitions(named_partitions(metrics, name), name) == named_partitions(metrics, name)


def test_in_a_job_of_several_sources_each_partition_is_named_by_its_sources_label() -> None:
    """The processors key a partition ``index:number`` (the source's place in the pipeline); the
    metrics said ``0:0`` and ``1:0`` for sources the user named ``kafka`` and ``files``, while their
    dead letters and late rows said ``kafka`` and ``files``; and a Kafka source's topic names were
    looked up by label, so they never applied in a job of several sources."""
    name = PartitionNames.of([("kafka", _Topics()), ("files", _numbered())])
    assert name is not None
    assert name("0:1001") == "kafka:views-1"
    assert name("1:1001") == "files:1001"  # numbered by its source
    assert name("kafka:views-1") == "kafka:views-1"  # named already
    assert name("7:3") == "7:3" and name("3") == "3"  # not a key of this job's: as it is
    lines = named_partitions({"partition_watermarks": {"0:0": 5, "1:2": 6}, "idle_partitions": ["1:2"],
                              "rows_late_by_partition": {"1:2": 1}}, name)
    assert lines == {"partition_watermarks": {"kafka:clicks-0": 5, "files:2": 6}, "idle_partitions": ["files:2"],
                     "rows_late_by_partition": {"files:2": 1}}
    sample = {"reason": "r", "partition": 1001, "offset": 2}  # a sample that names no source: its number stays
    assert named_partitions({"dead_letter_sample": sample}, name)["dead_letter_sample"]["partition"] == 1001
    for source, named in (("kafka", "views-1"), ("files", 1001), ("elsewhere", 1001)):  # by the source it names
        sample = {"reason": "r", "partition": 1001, "offset": 2, "source": source}
        assert named_partitions({"dead_letter_sample": sample}, name)["dead_letter_sample"] == {**sample,
                                                                                                "partition": named}


def test_one_source_that_numbers_its_partitions_changes_nothing() -> None:
    assert PartitionNames.of([("log", _numbered())]) is None
    both = PartitionNames.of([("a", _numbered()), ("b", _numbered())])
    assert both is not None and both("1:3") == "b:3"


def test_the_reference_runtime_names_a_unions_partitions_by_its_sources() -> None:
    from lowwater.api import CollectionSource, StreamExecutionEnvironment
    from lowwater.core.watermarks import WatermarkStrategy
    from lowwater.core.windows import TumblingEventTimeWindows
    from lowwater.runtime.reference import ReferenceRuntime

    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    a = env.from_source(CollectionSource([[{"k": "x", "ts": 1, "v": 1}]]), strategy, name="clicks")
    b = env.from_source(CollectionSource([[{"k": "x", "ts": 2, "v": 1}, {"ts": 3, "v": 1}]]), strategy, name="orders")
    a.union(b).key_by("k").window(TumblingEventTimeWindows.of(10)).sum("v").collect()
    job = ReferenceRuntime().execute(env)
    line = job.lines()[0].to_json()
    assert set(line["partition_watermarks"]) == {"clicks:0", "orders:0"}, line
    assert line["dead_letter_sample"]["source"] == "orders" and line["dead_letter_sample"]["partition"] == 0
    assert set(job.batches[0].windows["window aggregate"]["partition_watermarks"]) == {"0:0", "1:0"}  # the lanes'


def test_status_and_plot_list_partitions_by_source_or_topic_then_by_number() -> None:
    from lowwater.observe.fmt import partition_order

    names = ["10", "2", "views-0", "clicks-1", "clicks-0", "files:3", "files:12", "kafka:views-0", "0"]
    assert sorted(names, key=partition_order) == \
        ["0", "2", "10", "clicks-0", "clicks-1", "files:3", "files:12", "kafka:views-0", "views-0"]

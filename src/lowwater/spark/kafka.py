"""Real Kafka for lowwater: a source over Spark's own Kafka reader, and a local broker.

:class:`KafkaSource` reads topics with Spark's ``format("kafka")`` (the connector
``spark-sql-kafka-0-10`` that ``./dev`` fetches, see ``pom.xml``) and hands the stream to
:class:`~lowwater.spark.sources.KafkaShapedSource`: every ``(topic, partition)`` is one
lowwater partition with its own watermark, and the Kafka record timestamp is the source
timestamp. Offsets are Spark's: its checkpoint records them, so a restarted job goes on
where the last committed micro-batch ended.

:func:`local_broker` starts a throwaway single-node broker (KRaft, no ZooKeeper) from the
fetched jars on 127.0.0.1, a free port and a temporary log directory, and stops it at the
end. Tests, ``lowwater scenario run --source kafka`` and ``lowwater demo --kafka`` use it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lowwater.core.errors import ConfigurationError, LowwaterError
from lowwater.spark.dataframe_source import (
    check_topic_numbering,
    data_loss_warning,
    kafka_value_fields,
    skips_deleted_records,
    topic_partition_number,
    unknown_kafka_option,
)
from lowwater.spark.jvm import jvm_classpath
from lowwater.spark.sources import KafkaShapedSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["KafkaBroker", "KafkaSource", "create_topic", "local_broker", "new_cluster_id"]

#: the numbering of (topic, partition) as lowwater partitions: topic_index * this + partition
PARTITIONS_PER_TOPIC = 1000

DATA_LOSS_WARNING = data_loss_warning("KafkaSource")
"""Said when a :class:`KafkaSource` is given ``failOnDataLoss=false`` (Spark's options are case-insensitive)."""


#: options that KafkaSource's own parameters set, and lowwater checks: given in ``options`` they
#: would win in Spark's reader, unchecked
_PARAMETERS = {"kafka.bootstrap.servers": "bootstrap_servers", "subscribe": "topics", "subscribepattern": "topics",
               "assign": "topics", "startingoffsets": "starting_offsets"}


def _check_options(options: Mapping[str, str]) -> None:
    """Refuse an option Spark's Kafka source does not have (a misspelt ``maxOffsetPerTrigger`` was
    ignored without a word, and the batches, which decide what is late, were not what was asked),
    and one that a parameter of KafkaSource sets (Spark took it over the parameter, which lowwater
    had checked: a broker address in ``options`` waited minutes for a broker that was not there)."""
    for key in options:
        if not isinstance(key, str):
            raise ConfigurationError("options", f"expected option names as strings, got {key!r}")
        low = key.lower()
        if low in _PARAMETERS:
            raise ConfigurationError("options", f"{key!r} is KafkaSource's {_PARAMETERS[low]}=: give it there, "
                                                "where it is checked before the query starts")
        unknown = unknown_kafka_option(key)
        if unknown is not None:
            raise ConfigurationError("options", f"{key!r} {unknown}")


METADATA_TIMEOUT_S = 30
"""How long :meth:`KafkaSource.check_before_run` waits for a broker to answer."""


class _ClientLog(logging.Handler):
    """A Kafka client's log lines, kept (the last one: :attr:`last`) instead of printed: a broker
    that does not answer made the client print a line or more a connection attempt, hundreds
    over the 30 s wait, before the one-line error; and only those lines said "Failed to resolve"."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.last = ""
        self.logger = logging.Logger("lowwater.kafka.client")  # of no hierarchy: nothing reaches the root
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        # "FAIL [rdkafka#producer-1] [thrd:h:9092/bootstrap]: h:9092/bootstrap: Failed to resolve ..."
        self.last = record.getMessage().rsplit("]: ", 1)[-1]


def _check_starting_offsets(value: object) -> None:
    """``earliest``, ``latest`` or Spark's JSON of offsets per topic and partition; a misspelt word
    was taken, and Spark refused it when the query started with ``IllegalArgumentException: Expected
    e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got earlist``."""
    if value in ("earliest", "latest"):
        return
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed and all(isinstance(v, dict) for v in parsed.values()):
            return
    raise ConfigurationError("starting_offsets", f"expected 'earliest', 'latest' or Spark's JSON of offsets "
                             f"('{{\"topic\": {{\"0\": 23, \"1\": -2}}}}'), got {value!r}")


_NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
"""Kafka's zero Uuid (its ``toString``), which a broker without topic ids gives."""


class KafkaSource(KafkaShapedSource):
    """Topics read with Spark's Kafka source, one lowwater partition per (topic, partition).

    Partition ``p`` of ``topics[i]`` is lowwater partition ``i * 1000 + p`` (so with one
    topic, the Kafka partition number itself), which the metrics and ``lowwater status`` name
    ``topic-p`` (Kafka's own form) where there are several topics. ``value`` is one JSON object with
    ``value_fields``, read as :class:`~lowwater.spark.sources.KafkaShapedSource` reads it (the
    partitioned log's rules); a value that is not one, a field of another kind, a null value
    and a tombstone are dead-lettered with the reason and counted.

    Parameters
    ----------
    bootstrap_servers:
        ``host:port[,host:port...]``.
    topics:
        The topics, subscribed by name; partitions added to them later are picked up by
        Spark's source (it re-reads the topic metadata at every micro-batch).
    value_fields:
        The element's fields and types, e.g. ``[("user", "STRING"), ("ts", "BIGINT")]``: one of
        the partitioned log's (:mod:`lowwater.io.fields`), another is a :class:`ConfigurationError`.
    starting_offsets:
        ``earliest`` (default) or ``latest``, for a job without a checkpoint; a restarted job
        always resumes from its checkpoint.
    options:
        More ``kafka.*`` or source options for Spark's reader (e.g. ``maxOffsetsPerTrigger``):
        one Spark's Kafka source does not have (:data:`SPARK_KAFKA_OPTIONS`), or one that a
        parameter above sets (``kafka.bootstrap.servers``, ``subscribe``, ``startingOffsets``...),
        is a :class:`ConfigurationError`.
        ``failOnDataLoss`` is ``true`` here: a query whose next records Kafka has deleted
        (retention, a topic deleted and made again) stops with Spark's error. ``false`` lets
        Spark skip them, which lowwater cannot count, since it never reads them: the source
        warns when it is made (:data:`DATA_LOSS_WARNING`).
    """

    _checks_reader_options = False  # it checks its options when it is made, not again at the query's start
    checks_identity_each_batch = True
    """The engine checks each batch that the topics are still the ones the run started on
    (:meth:`~lowwater.spark.state.StateStore.check_sources`): one ``DescribeTopics`` request, with a
    client kept for the run (:meth:`read_identity`)."""

    def __init__(self, bootstrap_servers: str, topics: Sequence[str], value_fields: Sequence[tuple[str, str]],
                 starting_offsets: str = "earliest", options: Mapping[str, str] | None = None) -> None:
        if not isinstance(bootstrap_servers, str) or not bootstrap_servers:
            raise ConfigurationError("bootstrap_servers",
                                     f"expected 'host:port[,host:port...]', got {bootstrap_servers!r}")
        _check_starting_offsets(starting_offsets)
        if isinstance(topics, str) or not topics:
            raise ConfigurationError("topics", f"expected a non-empty list of topic names, got {topics!r}")
        self.bootstrap_servers = bootstrap_servers
        self.options = dict(options or {})
        _check_options(self.options)
        if skips_deleted_records(self.options):
            warnings.warn(DATA_LOSS_WARNING, RuntimeWarning, stacklevel=2)
        self.starting_offsets = starting_offsets
        kafka_value_fields(value_fields)  # refused now, not when the query starts
        self.value_fields = list(value_fields)
        self.topics = list(topics)
        self.partitions_per_topic = PARTITIONS_PER_TOPIC
        check_topic_numbering(self.topics, self.partitions_per_topic)

    def partitions(self) -> list[int]:
        """The topics' partitions at the start, as lowwater partitions: each has a watermark
        (``MIN`` until its first record or until it is idle) from the first micro-batch on, as a
        Flink Kafka source's splits do. Partitions added later join when their first record arrives.
        """
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        said = _ClientLog()  # the client's own lines, kept: printed, they were hundreds before the one error
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers, "logger": said.logger}
        admin = AdminClient(config)
        try:
            md = admin.list_topics(timeout=METADATA_TIMEOUT_S)
        except KafkaException as e:  # no broker answered: Spark's reader would say "Timed out ... listNodes"
            admin.poll(0)  # hands the client's queued lines to the logger
            last = f"; the client's last word: {said.last}" if said.last else ""
            raise ConfigurationError(
                "bootstrap_servers", f"no Kafka broker at {self.bootstrap_servers} answered in {METADATA_TIMEOUT_S} s "
                f"({e.args[0].str() if e.args and hasattr(e.args[0], 'str') else e}){last}") from None
        out = []
        for i, t in enumerate(self.topics or ()):
            meta = md.topics.get(t)
            if meta is None or meta.error is not None:
                raise ConfigurationError("topics", f"topic {t!r} not found on {self.bootstrap_servers}")
            out += [topic_partition_number(i, t, p, self.partitions_per_topic) for p in sorted(meta.partitions)]
        return out

    def read_identity(self) -> dict[str, str]:
        """Each topic's id (``{topic: id}``), which the checkpoint keeps (:meth:`StateStore.bind_sources`):
        a topic deleted and made again keeps its name and gets a new id, and Spark's checkpoint holds
        only offsets, which in the new topic name other records. A broker too old for topic ids
        (before Kafka 2.8), or that does not say, gives none for that topic."""
        from confluent_kafka import KafkaException, TopicCollection
        from confluent_kafka.admin import AdminClient

        admin = self.__dict__.get("_admin")
        if admin is None:  # one client for the run's checks, each batch's too
            said = _ClientLog()  # the client's own lines, kept out of the run's output
            config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers, "logger": said.logger}
            admin = self.__dict__["_admin"] = AdminClient(config)
        out: dict[str, str] = {}
        for topic, future in admin.describe_topics(TopicCollection(list(self.topics or ())),
                                                   request_timeout=METADATA_TIMEOUT_S).items():
            try:
                topic_id = getattr(future.result(timeout=METADATA_TIMEOUT_S), "topic_id", None)
            except (KafkaException, TimeoutError):  # check_before_run says what is wrong with the topic
                continue
            if topic_id is not None and str(topic_id) != _NO_TOPIC_ID:
                out[topic] = str(topic_id)
        return out

    def __getstate__(self) -> dict[str, Any]:
        """As a :class:`DataFrameSource`'s (without the subscription's DataFrame and Columns, which
        :meth:`spark_stream` builds), and without the admin client, which is this process's only.
        Until session 64 it kept the DataFrame: every pipeline that ships its source to the
        executors (the keyed path's Python stage A) or seals it in its state (the general path)
        failed its first batch with PySpark's ``CONTEXT_ONLY_VALID_ON_DRIVER`` (a user probe)."""
        return {k: v for k, v in super().__getstate__().items() if k != "_admin"}

    def identity_changed(self, recorded: Mapping[str, str], now: Mapping[str, str]) -> str | None:
        """What :meth:`read_identity` found changed since the checkpoint recorded it, said for a person."""
        changed = sorted(t for t in now if t in recorded and recorded[t] != now[t])
        if not changed:
            return None
        return (f"topic {', '.join(repr(t) for t in changed)} on {self.bootstrap_servers} is not the topic this "
                f"checkpoint read: it was deleted and made again (topic id {recorded[changed[0]]}, now "
                f"{now[changed[0]]}). The checkpoint's offsets would name other records in it, and Spark would "
                "skip the new topic's first records without a word. Hint: run the pipeline on a new checkpoint "
                "(it reads the new topic from its starting offsets)")

    def check_before_run(self) -> None:
        """The brokers answer and hold every topic, before Spark starts: Spark's own reader says
        ``UnknownTopicOrPartitionException`` without the topic's name, and waits minutes for a broker
        that is not there before ``Timed out waiting for a node assignment``, without its address."""
        self.partitions()

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("subscribe", ",".join(self.topics or ()))
            .option("startingOffsets", self.starting_offsets)
            .option("failOnDataLoss", "true")
        )
        for k, v in self.options.items():
            reader = reader.option(k, v)
        # the Kafka-shaped source over the subscription, built now that there is a session
        KafkaShapedSource.__init__(self, reader.load(), self.value_fields, self.topics, self.partitions_per_topic)
        return super().spark_stream(spark)

    def fields(self) -> list[str]:
        return [name for name, _ in self.value_fields]


@dataclass(frozen=True)
class KafkaBroker:
    """A running broker: ``bootstrap_servers`` is ``127.0.0.1:<port>``."""

    bootstrap_servers: str
    log_dir: str
    pid: int


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [kafka] %d{HH:mm:ss} %p %c{1}: %m%n
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = STDERR
"""


def new_cluster_id(random_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A KRaft cluster id: a random UUID, URL-safe base64 without padding, as Kafka's own
    ``Uuid.randomUuid()`` makes it, and like it never one that starts with ``-``: the storage
    tool's argument parser would take ``-t -xyz...`` for an option, and one broker start in 64
    failed with "argument --cluster-id/-t: expected one argument"."""
    while True:
        cluster_id = base64.urlsafe_b64encode(random_uuid().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@contextlib.contextmanager
def local_broker(heap_mb: int = 384, startup_timeout_s: float = 120.0) -> Iterator[KafkaBroker]:
    """Start a single-node Kafka broker (KRaft) on 127.0.0.1 and stop it at the end.

    It runs ``kafka.Kafka`` from ``jars/kafka`` (fetched by ``./dev``) with a ``heap_mb`` heap,
    a fresh log directory in a temp dir (removed at the end), one partition per topic by
    default and replication factor 1 for its internal topics.
    """
    cp = jvm_classpath("kafka")
    java = shutil.which("java")
    if java is None:
        raise LowwaterError("java is not on PATH: the Kafka broker needs Java 17 (run ./dev setup)")
    work = tempfile.mkdtemp(prefix="lowwater-kafka-")
    port, controller = _free_port(), _free_port()
    logs = os.path.join(work, "logs")
    props = os.path.join(work, "server.properties")
    with open(props, "w") as f:
        f.write("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={logs}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "log.flush.interval.messages=1",
            # keep every record: test and scenario timestamps are from 1970, and time-based
            # retention (7 days by default) would delete them at once
            "log.retention.ms=-1",
            "log.retention.bytes=-1",
            "",
        ]))
    log4j = os.path.join(work, "log4j2.properties")
    with open(log4j, "w") as f:
        f.write(_LOG4J2)
    jvm = [java, f"-Xmx{heap_mb}m", f"-Xms{min(heap_mb, 128)}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           f"-Dlog4j2.configurationFile=file:{log4j}", "-cp", cp]
    cluster_id = new_cluster_id()
    fmt = subprocess.run([*jvm, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", props],
                         capture_output=True, text=True, timeout=120)
    if fmt.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise LowwaterError(f"formatting the Kafka log dir failed: {fmt.stderr.strip() or fmt.stdout.strip()}")
    out = open(os.path.join(work, "broker.log"), "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen([*jvm, "kafka.Kafka", props], stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        _wait_ready(proc, port, startup_timeout_s, os.path.join(work, "broker.log"))
        yield KafkaBroker(f"127.0.0.1:{port}", logs, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        out.close()
        shutil.rmtree(work, ignore_errors=True)


def _wait_ready(proc: subprocess.Popen[Any], port: int, timeout_s: float, log: str) -> None:
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout_s
    admin = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log) as f:
                tail = f.read()[-2000:]
            raise LowwaterError(f"the Kafka broker exited with {proc.returncode}: {tail}")
        if admin is None:  # ask the client only once the port is open: it logs every refusal
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                time.sleep(0.3)
                continue
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        try:
            md = admin.list_topics(timeout=2)
            if md.brokers:
                return
        except Exception:  # not up yet
            pass
        time.sleep(0.5)
    raise LowwaterError(f"the Kafka broker did not come up on 127.0.0.1:{port} within {timeout_s} s")


def create_topic(bootstrap_servers: str, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication 1) and wait until it is there."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.2)
    raise LowwaterError(f"topic {topic} did not appear with {partitions} partitions within {timeout_s} s")

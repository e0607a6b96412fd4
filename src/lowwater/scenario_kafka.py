"""Run a scenario transcript on Spark through a real Kafka topic (``--source kafka``).

The scenario's events go to a topic with the scenario's partitions (event ``partition`` =
Kafka partition), produced with a real client, and Spark's own Kafka source reads them
(:class:`~lowwater.spark.kafka.KafkaSource`). Batch boundaries must be the transcript's, so
the runner produces one batch, runs the job ``available_now`` over it (exactly one Spark
micro-batch, on the same checkpoint each time), and only then produces the next.

An empty batch (a processing-time tick in a transcript) has no record to make Spark run a
micro-batch. Every batch therefore also writes one record to a second, one-partition
"clock" topic in the same subscription; the source drops clock records before lowwater sees
them, so they are no partition, no element and no activity. They only make the batch happen.

Without ``bootstrap_servers`` a throwaway broker is started from the fetched jars
(:func:`~lowwater.spark.kafka.local_broker`) and stopped afterwards.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowwater.api import StreamExecutionEnvironment
from lowwater.core.errors import LowwaterError
from lowwater.scenario import Scenario, _document_parts, _history, build_pipeline, load_scenario
from lowwater.spark.kafka import KafkaSource, create_topic, local_broker
from lowwater.spark.sources import BatchFilesSource, KafkaShapedSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["run_scenario_on_kafka"]

_runs = itertools.count()


class _ClockedKafkaSource(KafkaSource):
    """The scenario topic, plus a clock topic whose records only make a micro-batch happen."""

    def __init__(self, bootstrap_servers: str, topic: str, clock_topic: str,
                 value_fields: Sequence[tuple[str, str]]) -> None:
        super().__init__(bootstrap_servers, [topic], value_fields)
        self.clock_topic = clock_topic

    def spark_stream(self, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        df = (
            spark.readStream.format("kafka").option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("subscribe", f"{(self.topics or [''])[0]},{self.clock_topic}")
            .option("startingOffsets", "earliest").option("failOnDataLoss", "true").load()
            .where(F.col("topic") != F.lit(self.clock_topic))
        )
        KafkaShapedSource.__init__(self, df, self.value_fields, self.topics, self.partitions_per_topic)
        return super(KafkaSource, self).spark_stream(spark)


def run_scenario_on_kafka(data: dict[str, Any] | str | Path, bootstrap_servers: str | None = None,
                          path: str = "auto", spark: Any = None, workdir: str | None = None) -> dict[str, Any]:
    """Run a scenario on Spark reading a real Kafka topic; the output document of ``run_scenario``."""
    s = load_scenario(data)
    if bootstrap_servers is None:
        with local_broker() as broker:
            return _run(s, broker.bootstrap_servers, path, spark, workdir)
    return _run(s, bootstrap_servers, path, spark, workdir)


def _run(s: Scenario, bootstrap: str, path: str, spark: Any, workdir: str | None) -> dict[str, Any]:
    from confluent_kafka import Producer

    from lowwater.spark.engine import SparkRuntime

    run = f"lowwater-scenario-{os.getpid()}-{next(_runs)}"
    topic, clock_topic = run, f"{run}-clock"
    create_topic(bootstrap, topic, s.partitions)
    create_topic(bootstrap, clock_topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    with tempfile.TemporaryDirectory(prefix="lowwater-scenario-", dir=workdir) as tmp:
        source = _ClockedKafkaSource(bootstrap, topic, clock_topic, BatchFilesSource.infer_fields(s.batches))
        env = StreamExecutionEnvironment()
        results_sink, late_sink, _ = build_pipeline(s, env, source)
        pts = s.processing_times_ms
        clock: Any = (lambda b: pts[min(b, len(pts) - 1)]) if pts else None
        runtime = SparkRuntime(str(Path(tmp) / "checkpoint"), spark=spark, path=path,  # type: ignore[arg-type]
                               clock=clock, end_of_input=False)
        job = None
        try:
            for i, batch in enumerate(s.batches):
                for e in batch:
                    producer.produce(topic, json.dumps(e).encode(), partition=int(e["partition"]))
                producer.produce(clock_topic, str(i).encode(), partition=0)
                if producer.flush(30) != 0:
                    raise LowwaterError(f"batch {i}: the broker at {bootstrap} did not acknowledge every record")
                runtime.end_of_input = s.final_watermark and i == len(s.batches) - 1
                job = runtime.execute(env, "scenario")
                done = [b for b in job.batches() if not b.get("end_of_input")]
                if len(done) != i + 1:
                    raise LowwaterError(f"batch {i}: Spark ran {len(done)} micro-batches so far, expected {i + 1}")
        except LowwaterError as e:
            from lowwater.spark.state import StateStore

            done = [b for b in StateStore(runtime.checkpoint).batch_records() if "metrics" in b]
            doc = _document_parts(results_sink.results, late_sink.results, _history(done))
            doc["error"] = {"type": type(e).__name__, "message": str(e)}
            return doc
        assert job is not None
        batches = job.batches()
        per_batch = [b["metrics"]["combined_watermark"] for b in batches if not b.get("end_of_input")]
        doc = _document_parts(results_sink.results, late_sink.results, _history(batches))
        if not s.per_event:
            doc["batch_watermarks"] = per_batch
        doc["spark_path"] = job.path
        doc["source"] = {"kind": "kafka", "topic": topic, "partitions": s.partitions}
        return doc

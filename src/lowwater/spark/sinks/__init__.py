"""Sinks for the Spark engine: each receives ``(DataFrame, batch_id)`` (:mod:`.base`), idempotently per batch:
directories in any Spark file format, Delta tables (``txnAppId``/``txnVersion``; the delta-spark jar on
Spark's class path), PostgreSQL (upsert through JDBC), and a function."""

from lowwater.spark.sinks.base import DataFrameSink, ForeachDataFrameSink
from lowwater.spark.sinks.delta import DeltaSink
from lowwater.spark.sinks.files import DirectorySink, read_directory
from lowwater.spark.sinks.postgres import PostgresSink, PostgresUpsertSink

__all__ = ["DataFrameSink", "DeltaSink", "DirectorySink", "ForeachDataFrameSink", "PostgresSink", "PostgresUpsertSink",
           "read_directory"]

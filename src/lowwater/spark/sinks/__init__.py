"""Sinks for the Spark engine: directories (exactly-once per batch) and PostgreSQL (upsert)."""

from lowwater.spark.sinks.files import DirectorySink, read_directory
from lowwater.spark.sinks.postgres import PostgresSink, PostgresUpsertSink

__all__ = ["DirectorySink", "PostgresSink", "PostgresUpsertSink", "read_directory"]

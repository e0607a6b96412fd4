"""Sinks for window results written from Spark (``foreachBatch``-style ``write(df, batch_id)``)."""

from lowwater.spark.sinks.postgres import PostgresUpsertSink

__all__ = ["PostgresUpsertSink"]

"""lowwater.core: Flink's event-time semantics in pure Python (no pyspark)."""

"""lowwater on Apache Spark: session helpers and sinks (needs the ``spark`` extra: PySpark)."""

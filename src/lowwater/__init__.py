"""lowwater: Apache Flink's event-time model on Apache Spark."""

__version__ = "0.1.0"

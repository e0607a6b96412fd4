"""lowwater.io: sources that live on disk and in memory (pure Python, no pyspark).

* :mod:`lowwater.io.log` -- the embedded partitioned log (JSON-lines or
  Parquet segments per partition), read by offset range for exactly-once replay.
* :mod:`lowwater.io.synthetic` -- a deterministic synthetic stream with disorder, a
  lagging partition, an idle partition and late records.
"""

from lowwater.io.log import (
    FORMATS,
    MANIFEST_NAME,
    CorruptLogError,
    LogRecord,
    PartitionedLogReader,
    PartitionedLogWriter,
)
from lowwater.io.synthetic import SyntheticStream

__all__ = [
    "FORMATS",
    "MANIFEST_NAME",
    "CorruptLogError",
    "LogRecord",
    "PartitionedLogReader",
    "PartitionedLogWriter",
    "SyntheticStream",
]

"""The partitioned log, now the package :mod:`lowwater.io.log` (format, directory, reader,
writer); re-exported here so that imports keep working."""

from lowwater.io.log import (
    FORMATS,
    MANIFEST_NAME,
    CorruptLogError,
    LogRecord,
    PartitionedLogReader,
    PartitionedLogWriter,
)

__all__ = [
    "FORMATS",
    "MANIFEST_NAME",
    "CorruptLogError",
    "LogRecord",
    "PartitionedLogReader",
    "PartitionedLogWriter",
]

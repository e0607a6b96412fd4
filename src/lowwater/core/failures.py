"""The cause of a failure, from the text of the exceptions that wrap it.

A query that fails on Spark surfaces as a ``StreamingQueryException`` whose text nests a
Spark error class (``[STREAM_FAILED]``), a JVM trace, a py4j proxy error and the Python
traceback of the task or of ``foreachBatch``. :func:`root_cause` finds the line that names
the cause, in this order: a lowwater error; the innermost Python exception of a traceback;
a Spark error class that is not a wrapper (``[ARITHMETIC_OVERFLOW]``); a Java exception
(``java.io.IOException: No space left on device``); else the first line::

    >>> root_cause("[STREAM_FAILED] Query ... An exception was raised by the Python Proxy. "
    ...            "Return Message: Traceback (most recent call last):\\n  File \\"x.py\\", line 1\\n"
    ...            "PermissionError: [Errno 13] Permission denied: '/out'")
    "PermissionError: [Errno 13] Permission denied: '/out'"
"""

from __future__ import annotations

import re

__all__ = ["chain_text", "hint_for", "root_cause"]

_LOWWATER = re.compile(
    r"(?:lowwater\.core\.errors\.|(?<![\w.]))(UserFunctionError|MonotonyViolationError|ConfigurationError"
    r"|PipelineError|OutputSchemaError|BadRecordError|LowwaterError): ([^\n]+)")
"""A lowwater error, by its module's name or, where a message quotes one that :func:`root_cause`
found (``the streaming query failed: PipelineError: PostgreSQL upsert into t ... failed``), by
its own: a Java exception inside its text is its cause, not the failure (the CLI printed the
bare ``PSQLException`` and lost which sink and table had failed)."""
# ``Name: message``, or the name alone (Python prints ``KeyboardInterrupt`` so)
_PYTHON = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt))(?:: ?(.*))?$", re.MULTILINE)
#: the line a Python traceback ends with, for an exception of any name (``psycopg2.errors.UniqueViolation: ...``)
_RAISED = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)(?:: ?(.*))?$")
_SPARK_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]{3,}(?:\.[A-Z0-9_]+)?)\]\s*([^\n]*)")
_JAVA = re.compile(r"((?:java|javax|org|scala)\.[\w.$]+(?:Exception|Error)): ([^\n]+)")

#: Spark error classes that only say that something inside failed.
_WRAPPERS = frozenset({
    "STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR", "PYTHON_EXCEPTION", "TASK_WRITE_FAILED",
    "FAILED_EXECUTE_UDF", "PYTHON_DATA_SOURCE_ERROR", "INTERNAL_ERROR",
})
_PY4J_WRAPPERS = ("py4j.", "Py4JJavaError", "Py4JError", "StreamingQueryException", "PythonException",
                  "CapturedException")


def _raised(traceback: str) -> list[tuple[str, str]]:
    """The exception a traceback's text (from its header on) ends with: its first line after the
    frames (which are indented), whatever the exception's name. Named ``...Error`` and the like
    it is found by :data:`_PYTHON` first; a ``UniqueViolation`` or a ``Timeout`` is not, and the
    cause was the wrapper's first line, ending at the traceback's header."""
    for line in traceback.splitlines()[1:]:
        if not line.strip() or line[0].isspace():
            continue
        found = _RAISED.match(line.strip())
        return [(found.group(1), found.group(2) or "")] if found else []
    return []


def root_cause(failure: str | BaseException, limit: int = 400) -> str:
    """The one line that names the cause of a failure: ``failure`` is its text, or an exception,
    whose text and the texts of the exceptions it wraps (``__cause__``, else ``__context__``)
    are searched together."""
    text = failure if isinstance(failure, str) else chain_text(failure)
    line = _root_line(text, limit)
    if "Some data may have been lost" in line:  # Spark's Kafka data loss: its reason is lines below
        # the first Reason: after the loss's own text; a foreachBatch wrapper's comes before it, and
        # says only that a Python proxy raised (a user probe, session 59)
        reason = _KAFKA_LOSS_REASON.search(text, max(0, text.find("Some data may have been lost")))
        if reason is not None and reason.group(1).strip() not in line:
            line = f"{line.rstrip(';')}: {reason.group(1).strip()}"[:limit]
    return line


_KAFKA_LOSS_REASON = re.compile(r"Reason:\s*([^\n]*\S[^\n]*)")
"""The line after ``Reason:`` in Spark's ``KAFKA_DATA_LOSS`` message: which partition and offsets."""


def _root_line(text: str, limit: int) -> str:
    found = _LOWWATER.findall(text)
    if found:
        name, message = found[-1]
        return f"{name}: {message.strip()}"[:limit]
    if "Traceback (most recent call last)" in text:
        tail = text[text.rindex("Traceback (most recent call last)"):]
        for name, message in [*_PYTHON.findall(tail), *_raised(tail)]:
            if not any(w in name for w in _PY4J_WRAPPERS):
                name = name.rsplit(".", 1)[-1]
                return (f"{name}: {message.strip()}" if message.strip() else name)[:limit]
    for name, message in _SPARK_CLASS.findall(text):
        if name.split(".")[0] not in _WRAPPERS:
            return f"[{name}] {message.strip()}"[:limit]
    for name, message in _JAVA.findall(text):
        if "SparkException" not in name and "StreamingQueryException" not in name:
            return f"{name}: {message.strip()}"[:limit]
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:limit]
    return text[:limit]


def chain_text(e: BaseException) -> str:
    """The texts of ``e`` and of the exceptions it was raised from or while handling, one after
    another: where a cause's words are, whatever wraps it."""
    texts, seen = [], set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        texts.append(str(cur))
        cur = cur.__cause__ or cur.__context__
    return "\n".join(texts)


_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"No module named '?lowwater"),
     "lowwater is not installed in the Python that Spark's workers run (PYSPARK_PYTHON): install it there "
     "on every node (a wheel in the image, or pip install on each); --py-files does not reach Spark's Python "
     "data sources (docs/cluster.md)"),
    (re.compile(r"PythonException[\s\S]*No module named '?\w"),  # raised in a Python worker of Spark's
     "a module the pipeline's code imports is missing in the Python that Spark's workers run (PYSPARK_PYTHON), "
     "though this driver imported it: ship it with spark-submit --py-files (a .py, or a .zip of a package), or "
     "install it in that Python on every node (docs/cluster.md)"),
    (re.compile(r"Timed out while waiting for the Python worker to connect back"),
     "a Python worker of Spark's did not start: the Python that PYSPARK_PYTHON (or spark.pyspark.python) names, "
     "on this machine or a worker, probably lacks what pyspark needs (pyarrow, pandas) or lowwater; check with "
     "<that python> -c 'import pyarrow, pandas, lowwater' (docs/cluster.md)"),
    (re.compile(r"Failed to find data source: kafka"),
     "Spark's Kafka connector is not on the class path: run ./dev setup (jars/), point LOWWATER_JARS at that "
     "folder, or spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"),
    (re.compile(r"S3AFileSystem not found|No FileSystem for scheme \"?s3a"),
     "an s3a: URI needs hadoop-aws and the AWS SDK on Spark's class path: spark-submit --packages "
     "org.apache.hadoop:hadoop-aws:3.5.0 (pyspark 4.2.0's Hadoop)"),
    (re.compile(r"java\.net\.(ConnectException|UnknownHostException|NoRouteToHostException)|Connection refused"),
     "a service the job reads or writes did not answer: the checkpoint's file system (is HDFS running, and are "
     "the URI's host and port right?), or a broker or database the pipeline names"),
    (re.compile(r"Some data may have been lost because they are not available in Kafka"),
     "Kafka deleted records this job had not read (retention while it was down or behind, or a topic deleted): "
     "they cannot be counted. Run on a new checkpoint to read the topic from its starting offsets, or, to go on "
     "past them, options={'failOnDataLoss': 'false'} (they go uncounted; docs/reliability.md)"),
    (re.compile(r"MALFORMED_RECORD_IN_PARSING"),  # the keyed and general paths' outputs, parsed FAILFAST
     "a value of an output did not fit the column type its batches settled on (docs/semantics.md): a Decimal "
     "with more digits than DECIMAL(38,s) holds (38 in all, s after the point; a DECIMAL sum past 38 digits has "
     "no Spark type: read the field with fewer places), or a number past its column's range"),
    (re.compile(r"java\.net\.SocketException: Connection reset|java\.io\.EOFException: End of File"),
     "a connection to the checkpoint's file system (or a broker or database) broke during the batch; run the "
     "job again when it is back: it resumes from its checkpoint"),
)


def hint_for(failure: str | BaseException) -> str | None:
    """What to do about a failure whose cause lowwater knows by its text, or the texts of the
    exceptions it wraps (a missing module, jar or file system, a service that does not answer), or
    ``None``."""
    text = failure if isinstance(failure, str) else chain_text(failure)
    for pattern, hint in _HINTS:
        if pattern.search(text):
            return hint
    return None

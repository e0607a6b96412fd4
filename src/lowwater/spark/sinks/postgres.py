"""Upsert window results from Spark into a PostgreSQL table, exactly once per key and window.

Window results are rows ``key, window_start, window_end, value, fire_index`` (optionally
``batch_id`` and further columns). A window may fire several times (early and late firings,
re-firings for late elements); each firing has a higher ``fire_index`` and its row replaces the
previous one. The table thus holds, for every (key, window_start, window_end), the latest firing.

How one micro-batch is written (:meth:`PostgresUpsertSink.write`):

1. Spark's JDBC writer copies the batch into a staging table ``<table>__stage_<batch_id>``
   (mode ``overwrite``: a replay drops and recreates it, so leftovers of a crashed attempt,
   even duplicated rows from a retried task, cannot leak into the result).
2. In ONE transaction, through ``java.sql.DriverManager`` in Spark's driver JVM (no Python
   database driver needed): create the table if missing (or add the columns a batch brings to
   it), then::

       INSERT INTO table AS t (...)
       SELECT DISTINCT ON (keys) ... FROM stage ORDER BY keys, fire_index DESC, lowwater_seq DESC
       ON CONFLICT (keys) DO UPDATE SET ... WHERE excluded.fire_index >= t.fire_index;
       DROP TABLE stage;

Why this is exactly-once in effect: the transaction either applies the whole batch or nothing.
Spark replays a batch (same ``batch_id``, same rows) only if it was not recorded as done, for
instance after a crash between step 2's commit and Spark's commit log; the replay then upserts
rows equal to the stored ones (``>=`` lets equal fire indexes through), which changes nothing.
A row never replaces one with a higher ``fire_index``, so an out-of-order or stale firing (or a
replay of an older batch) cannot roll a window back. Within one batch only the highest firing of
each window is kept (``DISTINCT ON``), as ``ON CONFLICT`` may touch a row only once per statement;
of rows with the same ``fire_index`` (a process function's, to which its user gave one), the
batch's last (:data:`SEQ`).
A write that fails (a constraint of the table's own, a value the server refuses) drops its
staging table before it reports the failure. A crash after step 1 leaves a staging table that the
replay overwrites and then drops; a batch that is never replayed (its checkpoint deleted) leaves
it behind, to be dropped by hand.

Which job writes a table: ``fire_index`` orders the firings of one job only. A job on a new checkpoint
fires its windows again from ``fire_index`` 0, and the upsert kept the old job's higher firings over
them, one table of two jobs' results without a word. So a sink bound to a job
(:meth:`PostgresSink.bind_job`) records, in the transaction of each batch, the job's id for the table in
a side table :data:`JOBS_TABLE` (``table_name, job_id``) in the table's schema, and before the query
starts :func:`check_jobs` (:func:`refuse_job` decides) refuses a table another job's rows are in, and,
for a job that resumes, a table it wrote that is gone. The record is kept beside the table, not on it
(a comment), so that it outlives a ``DROP TABLE``: a job that has not yet fired a window has written no
table, and only the record tells that from one whose table was dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pyspark.sql import types as T

from lowwater.core.errors import ConfigurationError, OutputSchemaError, PipelineError
from lowwater.core.windows.events import RESULT_FIELDS
from lowwater.spark import faults
from lowwater.spark.sinks.base import DataFrameSink

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["JOBS_TABLE", "PostgresSink", "PostgresUpsertSink", "check_jobs", "execute_statements", "mask_jdbc_url",
           "postgres_type", "refuse_job"]

FIRE_INDEX = "fire_index"
SEQ = "lowwater_seq"
"""A column of the staging table only: each row's place in the batch's DataFrame (Spark's
``monotonically_increasing_id``, which grows with the partition and the row's place in it). Of two
rows of one window with the same ``fire_index`` the later one is kept, as the later firing: a
window's rows are in one partition in the order it fired them, on the keyed and general paths (a
process function's rows, to which a user gave ``fire_index`` 0). Until session 65 the tie went to
the larger values, so the table kept an older firing (a user probe)."""
_DRIVER = "org.postgresql.Driver"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TABLE = re.compile(rf"(?:{_IDENT.pattern}\.)?{_IDENT.pattern}")
_MAX_IDENT = 63  # PostgreSQL's NAMEDATALEN - 1; longer names are silently truncated
JOBS_TABLE = "lowwater_sink_jobs"
"""The side table, in each results table's schema, recording the job that writes it (``table_name``
primary key, ``job_id``)."""


def refuse_job(table: str, job_id: str | None, resumes: bool, exists: bool, has_rows: bool,
               recorded: str | None) -> ConfigurationError | None:
    """:func:`check_jobs`'s decision for one table, before a job writes it; None: accepted.

    ``resumes``: the job's checkpoint has committed batches (a reference run never does);
    ``exists``/``has_rows``: the table's state; ``recorded``: the job whose rows :data:`JOBS_TABLE`
    records in it (None: no record; a job that wrote the table keeps its record after a DROP TABLE).

    * A checkpoint made before jobs had ids (``job_id`` None): not checked, as before.
    * A table that holds rows of another job (the record names another id) is refused, new or
      resuming: this job's firings start again at ``fire_index`` 0, and the upsert keeps the other
      job's higher firings of the same windows over them.
    * A new job and a table with rows but no job recorded (made by hand, or by a lowwater before the
      record): refused as well. Its rows may be anyone's; upserting over them would mix them with
      this job's results in the same silence. Truncating the table, or naming a new one, is the
      user's call and a cheap one. An empty table is accepted, whoever made it.
    * A resuming job and a table with rows but no record: accepted (and recorded at the next
      write). It is the table an older lowwater wrote for this checkpoint.
    * The same job: accepted, also a new checkpoint whose first attempt wrote batch 0 and was
      killed before its commit (its rows and its record are in the table).
    * A resuming job whose table is gone, where the record says it wrote it: refused. The windows it
      fired before are in no table, and the job would re-create it with only its new firings. Where
      it has no record the job has not written the table (no window has fired yet; its first write
      was killed before the commit): accepted.
    """
    if job_id is None:
        return None
    if not exists:
        if not resumes or recorded != job_id:
            return None
        return ConfigurationError(
            "table", f"the PostgreSQL table {table} is missing, and this job's checkpoint has committed batches: "
            "the windows it fired before were written there and would not be written again (the job would "
            "re-create the table with its new firings only). Hint: restore the table (from a backup), or start "
            "the job on a new checkpoint to fire every window again")
    if recorded == job_id or not has_rows:
        return None
    if recorded is None and resumes:
        return None
    whose = (f"another lowwater job (job {recorded})" if recorded is not None
             else "rows that no lowwater job recorded writing (a table made by hand, or by an older lowwater)")
    return ConfigurationError(
        "table", f"the PostgreSQL table {table} holds {whose}, and this job's firings start again at fire_index 0: "
        "the upsert would keep those rows' higher firings over this job's results, one table of two jobs' "
        "rows. Hint: give the sink a new table, or drop or truncate this one (TRUNCATE " + table + ") if its "
        "rows are no longer wanted")


_SECRET_PARAM = re.compile(r"((?:password|pass|pwd|sslpassword|sslkey)=)[^&;]*", re.IGNORECASE)
_USERINFO = re.compile(r"(//)[^/@]*@")
_FIX_JAR = ("start the session with the driver jar: lowwater.spark.session.get_or_create_session("
            "jars=[postgres_jdbc_jar()]) (bash scripts/ensure_postgres.sh installs /usr/share/java/postgresql.jar), "
            "or spark-submit --jars postgresql.jar")


def mask_jdbc_url(text: str) -> str:
    """``text`` with credentials in JDBC URLs masked (``password=***``, ``//***@host``)."""
    return _USERINFO.sub(r"\1***@", _SECRET_PARAM.sub(r"\1***", text))


def check_jdbc_driver(spark: Any) -> None:
    """Fail up front, naming the fix, when the session cannot load the PostgreSQL JDBC driver."""
    jvm: Any = getattr(spark, "_jvm", None)
    if jvm is None:
        raise ConfigurationError("spark", "needs a classic (py4j) SparkSession; Spark Connect has no driver JVM access")
    try:
        jvm.org.apache.spark.sql.execution.datasources.jdbc.DriverRegistry.register(_DRIVER)
    except Exception:
        raise ConfigurationError("spark", f"the PostgreSQL JDBC driver ({_DRIVER}) is not on the session's class "
                                          f"path; {_FIX_JAR}") from None


def _quote(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def postgres_type(dtype: T.DataType) -> str:
    """The PostgreSQL column type for a Spark SQL type (ValueError if there is none here)."""
    simple: list[tuple[type[T.DataType], str]] = [
        (T.StringType, "TEXT"),
        (T.VarcharType, "TEXT"),
        (T.CharType, "TEXT"),
        (T.LongType, "BIGINT"),
        (T.IntegerType, "INTEGER"),
        (T.ShortType, "SMALLINT"),
        (T.ByteType, "SMALLINT"),
        (T.DoubleType, "DOUBLE PRECISION"),
        (T.FloatType, "REAL"),
        (T.BooleanType, "BOOLEAN"),
        (T.TimestampNTZType, "TIMESTAMP"),
        (T.TimestampType, "TIMESTAMP WITH TIME ZONE"),
        (T.DateType, "DATE"),
        (T.BinaryType, "BYTEA"),
    ]
    if isinstance(dtype, T.DecimalType):
        return f"NUMERIC({dtype.precision},{dtype.scale})"
    for cls, name in simple:
        if isinstance(dtype, cls):
            return name
    raise ValueError(f"no PostgreSQL column type for Spark type {dtype.simpleString()}")


def _connect(spark: SparkSession, jdbc_url: str, user: str | None, password: str | None) -> Any:
    """A JDBC connection from Spark's driver JVM (the caller closes it)."""
    jvm: Any = getattr(spark, "_jvm", None)
    if jvm is None:
        raise ConfigurationError(
            "spark", "needs a classic (py4j) SparkSession; Spark Connect has no driver JVM access"
        )
    check_jdbc_driver(spark)
    props = jvm.java.util.Properties()
    if user is not None:
        props.setProperty("user", user)
    if password is not None:
        props.setProperty("password", password)
    # check_jdbc_driver registered it with Spark's DriverRegistry, which makes drivers loaded by
    # Spark's class loaders (spark.jars) visible to DriverManager too
    return jvm.java.sql.DriverManager.getConnection(jdbc_url, props)


def query_rows(spark: SparkSession, jdbc_url: str, sql: str, user: str | None = None,
               password: str | None = None) -> list[tuple[Any, ...]]:
    """The rows of one SQL query, run over JDBC in Spark's driver JVM (for small answers)."""
    conn = _connect(spark, jdbc_url, user, password)
    try:
        stmt = conn.createStatement()
        try:
            rs = stmt.executeQuery(sql)
            width = rs.getMetaData().getColumnCount()
            out = []
            while rs.next():
                out.append(tuple(rs.getObject(i) for i in range(1, width + 1)))
            return out
        finally:
            stmt.close()
    finally:
        conn.close()


_INTEGER_DIGITS = {"smallint": 5, "integer": 10, "bigint": 19}
_NUMERIC = re.compile(r"numeric\((\d+),(\d+)\)")


def _digits(pg_type: str) -> tuple[int, int] | None:
    """(integer digits, fraction digits) a numeric type holds; None if it is not one
    (unconstrained ``numeric`` holds any)."""
    if pg_type in _INTEGER_DIGITS:
        return _INTEGER_DIGITS[pg_type], 0
    if pg_type == "numeric":
        return 1000, 1000
    m = _NUMERIC.fullmatch(pg_type)
    return (int(m[1]) - int(m[2]), int(m[2])) if m else None


def holds(column: str, values: str) -> bool:
    """Whether a PostgreSQL column of type ``column`` takes values of type ``values`` without
    changing one in silence (both as ``format_type`` names them: ``bigint``, ``numeric(38,18)``).
    PostgreSQL converts more on INSERT: a ``double precision`` into a ``bigint`` column is rounded
    (2.5 is stored as 2), into ``numeric(10,2)`` rounded to cents, a ``timestamp with time zone``
    into a ``timestamp`` shifted to the session's zone. What passes: the same type, as an output's
    columns keep theirs from batch to batch on the other sinks; a ``double precision`` column for
    ``real``, integers and decimals; a text column (``text``, ``varchar(n)``, ``char(n)``) for
    anything but bytes; an integer or ``numeric`` column for integers and decimals with no more
    fraction digits than it keeps (a value with more integer digits than a column holds fails
    loudly in PostgreSQL, "out of range", so a narrower integer column passes here)."""
    if column == values:
        return True
    if column == "double precision":
        return values == "real" or _digits(values) is not None
    if column == "text" or column.startswith(("character varying", "character(")):
        return values != "bytea"
    have, need = _digits(column), _digits(values)
    return have is not None and need is not None and have[1] >= need[1]


_FORMAT_NAMES = {"TIMESTAMP": "timestamp without time zone"}


def format_name(pg_type: str) -> str:
    """A :func:`postgres_type` as PostgreSQL's ``format_type`` names it (``bigint``)."""
    return _FORMAT_NAMES.get(pg_type, pg_type.lower())


def execute_statements(
    spark: SparkSession,
    jdbc_url: str,
    statements: Sequence[str],
    user: str | None = None,
    password: str | None = None,
    before_commit: Callable[[], None] | None = None,
) -> list[int]:
    """Run SQL statements in one transaction over JDBC in Spark's driver JVM; the update counts.

    Commits if all succeed, rolls back and re-raises otherwise. The JDBC driver must be on the
    driver's class path (see ``lowwater.spark.session.get_or_create_session(jars=...)``).
    ``before_commit`` is called after the last statement, inside the transaction (the crash
    tests kill the driver there).
    """
    conn = _connect(spark, jdbc_url, user, password)
    try:
        conn.setAutoCommit(False)
        counts = []
        for sql in statements:
            stmt = conn.createStatement()
            try:
                counts.append(int(stmt.executeUpdate(sql)))
            finally:
                stmt.close()
        if before_commit is not None:
            before_commit()
        conn.commit()
        return counts
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.close()


class PostgresUpsertSink:
    """Write window results to a PostgreSQL table, one upsert transaction per micro-batch.

    Use as ``stream.writeStream.foreachBatch(sink.write)`` or call ``write(df, batch_id)``.
    Rows are upserted on ``key_columns``; a row replaces the stored one only if its
    ``fire_index`` is at least as high. See the module docstring for the exactly-once argument.

    Args:
        jdbc_url: ``jdbc:postgresql://host:port/database``.
        table: ``name`` or ``schema.name`` (letters, digits, underscores; folded to lower case
            like an unquoted SQL name). Created on the first write if missing, with a primary
            key on ``key_columns`` and column types derived from the DataFrame's schema. A batch
            whose values a column of the table would change in silence (:func:`holds`: a DOUBLE
            into BIGINT is rounded) fails with :class:`~lowwater.core.errors.OutputSchemaError`
            before anything is staged; a column a batch brings is added to the table, in the
            batch's transaction.
        user, password: credentials, if the server wants them.
        key_columns: the columns identifying one window's result.
    """

    def __init__(
        self,
        jdbc_url: str,
        table: str,
        user: str | None = None,
        password: str | None = None,
        key_columns: Sequence[str] = ("key", "window_start", "window_end"),
    ) -> None:
        if not isinstance(jdbc_url, str) or not jdbc_url.startswith("jdbc:postgresql:"):
            raise ConfigurationError(
                "jdbc_url", f"must start with 'jdbc:postgresql:' (got {mask_jdbc_url(repr(jdbc_url))})"
            )
        if not isinstance(table, str) or not _TABLE.fullmatch(table):
            raise ConfigurationError(
                "table",
                f"must be 'name' or 'schema.name' of letters, digits and underscores, "
                f"not starting with a digit (got {table!r})",
            )
        parts = table.lower().split(".")
        if any(len(p) > _MAX_IDENT for p in parts):
            raise ConfigurationError("table", f"names are at most {_MAX_IDENT} characters")
        if parts[-1] == JOBS_TABLE:
            raise ConfigurationError("table", f"{JOBS_TABLE} is the side table recording which job writes each "
                                              "results table; name another table")
        key_columns = tuple(key_columns)
        if not key_columns or isinstance(key_columns, str):
            raise ConfigurationError("key_columns", "must be a non-empty sequence of names")
        for col in key_columns:
            if not isinstance(col, str) or not _IDENT.fullmatch(col):
                raise ConfigurationError("key_columns", f"invalid column name {col!r}")
        if len(set(key_columns)) != len(key_columns) or FIRE_INDEX in key_columns:
            raise ConfigurationError(
                "key_columns", f"must be distinct and not include {FIRE_INDEX!r}"
            )
        self.jdbc_url = jdbc_url
        self.user = user
        self.password = password
        self.key_columns = key_columns
        self._schema = parts[0] if len(parts) == 2 else None
        self._name = parts[-1]
        self.table = ".".join(parts)
        self.job_id: str | None = None
        """The job writing the table (:meth:`PostgresSink.bind_job`), recorded in :data:`JOBS_TABLE` by
        each write; None: not recorded (a sink used on its own, a checkpoint without an id)."""

    def __repr__(self) -> str:
        return (
            f"PostgresUpsertSink({mask_jdbc_url(repr(self.jdbc_url))}, {self.table!r}, "
            f"key_columns={self.key_columns!r})"
        )

    def _qualified(self, name: str) -> str:
        return ".".join(_quote(p) for p in ((self._schema,) if self._schema else ()) + (name,))

    def staging_table(self, batch_id: int) -> str:
        """The quoted name of the batch's staging table (same schema as the table)."""
        suffix = f"__stage_{batch_id}"
        name = self._name + suffix
        if len(name) > _MAX_IDENT:  # keep it unique and within PostgreSQL's limit
            digest = hashlib.sha1(self._name.encode()).hexdigest()[:8]
            name = f"{self._name[: _MAX_IDENT - len(suffix) - 9]}_{digest}{suffix}"
        return self._qualified(name)

    def _check_columns(self, schema: T.StructType) -> list[T.StructField]:
        fields = list(schema.fields)
        names = [f.name for f in fields]
        for col in names:
            if not _IDENT.fullmatch(col):
                raise ConfigurationError(
                    "df", f"column name {col!r} is not letters, digits and underscores"
                )
        lowered = [n.lower() for n in names]
        if len(set(lowered)) != len(lowered):
            raise ConfigurationError("df", f"column names clash ignoring case: {names}")
        if SEQ in lowered:
            raise ConfigurationError("df", f"the column name {SEQ!r} is the sink's own (its staging table's)")
        missing = [c for c in (*self.key_columns, FIRE_INDEX) if c not in names]
        if missing:
            hint = ("; a process function's rows: give each a fire_index (0 will do: of two rows of a window, "
                    "the later one replaces the earlier)") if missing == [FIRE_INDEX] else ""
            raise ConfigurationError(
                "df", f"window results need the columns {missing} (it has {names}){hint}"
            )
        for f in fields:
            try:
                postgres_type(f.dataType)
            except ValueError as e:
                raise ConfigurationError("df", f"column {f.name!r}: {e}") from None
        return fields

    def statements(self, fields: Sequence[T.StructField], batch_id: int,
                   new: Sequence[T.StructField] = ()) -> list[str]:
        """The SQL of step 2 (create if missing, add the ``new`` columns a batch brings to a table
        that exists, record :attr:`job_id` in :data:`JOBS_TABLE` if there is one, upsert from the
        stage, drop the stage)."""
        table, stage = self._qualified(self._name), self.staging_table(batch_id)
        cols = [_quote(f.name) for f in fields]
        keys = [_quote(c) for c in self.key_columns]
        others = [c for c in cols if c not in keys]
        fire = _quote(FIRE_INDEX)
        defs = [
            f"{_quote(f.name)} {postgres_type(f.dataType)}"
            + (" NOT NULL" if _quote(f.name) in keys else "")
            for f in fields
        ]
        create = (
            f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(defs)}, "
            f"PRIMARY KEY ({', '.join(keys)}))"
        )
        # Highest firing per window and, of rows with the same fire_index (a process function's
        # rows, whose fire_index the user gives), the last the batch holds (:data:`SEQ`)
        order = [*keys, f"{fire} DESC", f"{_quote(SEQ)} DESC"]
        upsert = (
            f"INSERT INTO {table} AS t ({', '.join(cols)}) "
            f"SELECT DISTINCT ON ({', '.join(keys)}) {', '.join(cols)} FROM {stage} "
            f"ORDER BY {', '.join(order)} "
            f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in others)
            + f" WHERE excluded.{fire} >= t.{fire}"
        )
        added = [f"ALTER TABLE {table} " + ", ".join(f"ADD COLUMN IF NOT EXISTS {_quote(f.name)} "
                                                     f"{postgres_type(f.dataType)}" for f in new)] if new else []
        return [create, *added, *self._record_job(), upsert, f"DROP TABLE {stage}"]

    def _jobs_ddl(self) -> str:
        return (f"CREATE TABLE IF NOT EXISTS {self._qualified(JOBS_TABLE)} (table_name TEXT PRIMARY KEY, "
                "job_id TEXT NOT NULL, recorded_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now())")

    def _record_job(self) -> list[str]:
        """The statements recording :attr:`job_id` as the table's writer (none without one)."""
        if self.job_id is None:
            return []
        jobs = self._qualified(JOBS_TABLE)
        return [self._jobs_ddl(),
                f"INSERT INTO {jobs} AS j (table_name, job_id) "
                f"VALUES ({_literal(self._name)}, {_literal(self.job_id)}) "
                "ON CONFLICT (table_name) DO UPDATE SET job_id = excluded.job_id, recorded_at = now() "
                "WHERE j.job_id IS DISTINCT FROM excluded.job_id"]

    def write(self, df: DataFrame, batch_id: int) -> int:
        """Upsert one micro-batch; returns the number of table rows inserted or updated.

        Rows of windows already stored with a higher ``fire_index`` are not counted (they are
        not written), nor are lower firings of a window that fires twice within the batch.
        """
        if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
            raise ConfigurationError("batch_id", f"must be an int >= 0 (got {batch_id!r})")
        fields = self._check_columns(df.schema)
        try:
            return self._write(df, fields, batch_id)
        except (ConfigurationError, PipelineError):
            raise
        except Exception as e:  # the JDBC driver's message may quote the URL: mask it, drop the Java trace
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            for line in str(e).splitlines():
                if "PSQLException" in line or "SQLException" in line:
                    first = line.strip()
                    break
            raise PipelineError(f"PostgreSQL upsert into {self.table} at {mask_jdbc_url(self.jdbc_url)} failed "
                                f"(batch {batch_id}): {mask_jdbc_url(first.lstrip(': '))}") from None

    def check_table(self, spark: SparkSession) -> None:
        """Before the query starts: the server answers with these credentials and, where the table
        exists, it has a unique constraint on exactly the key columns, which the upsert's ``ON
        CONFLICT`` needs. Both failed the first batch's write, after it had been computed and the
        other sinks had written it, the second with PostgreSQL's "there is no unique or exclusion
        constraint matching the ON CONFLICT specification" and its staging table left behind."""
        table = self._qualified(self._name)
        keys = ", ".join(_literal(c) for c in sorted(self.key_columns))
        sql = (f"SELECT to_regclass('{table}') IS NOT NULL, EXISTS (SELECT 1 FROM pg_index i "
               f"WHERE i.indrelid = to_regclass('{table}') AND i.indisunique AND i.indpred IS NULL "
               f"AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text) FROM pg_attribute a "
               f"WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = ARRAY[{keys}]::text[] "
               f"AND i.indnatts = {len(self.key_columns)})")
        try:
            [(exists, unique)] = query_rows(spark, self.jdbc_url, sql, self.user, self.password)
        except (ConfigurationError, PipelineError):
            raise
        except Exception as e:  # the server, the database or the credentials
            first = next((line.strip() for line in str(e).splitlines() if "SQLException" in line or
                          "PSQLException" in line), (str(e).strip().splitlines() or [type(e).__name__])[0])
            raise ConfigurationError("jdbc_url", f"PostgreSQL at {mask_jdbc_url(self.jdbc_url)} refused the "
                                                 f"connection: {mask_jdbc_url(first.lstrip(': '))}") from None
        if exists and not unique:
            raise ConfigurationError("table", f"{self.table} exists without a primary key or unique constraint on "
                                              f"({', '.join(self.key_columns)}), which the upsert needs; add one "
                                              f"(ALTER TABLE {self.table} ADD PRIMARY KEY "
                                              f"({', '.join(self.key_columns)})), or name a new table")

    def table_state(self, spark: SparkSession) -> tuple[bool, bool, str | None]:
        """Whether the table exists, whether it has rows, and the job :data:`JOBS_TABLE` records for it."""
        table, jobs = self._qualified(self._name), self._qualified(JOBS_TABLE)
        [(exists, has_jobs)] = query_rows(spark, self.jdbc_url, f"SELECT to_regclass('{table}') IS NOT NULL, "
                                          f"to_regclass('{jobs}') IS NOT NULL", self.user, self.password)
        has_rows, recorded = False, None
        if exists:
            [(has_rows,)] = query_rows(spark, self.jdbc_url, f"SELECT EXISTS (SELECT 1 FROM {table})",
                                       self.user, self.password)
        if has_jobs:
            found = query_rows(spark, self.jdbc_url, f"SELECT job_id FROM {jobs} WHERE table_name = "
                               f"{_literal(self._name)}", self.user, self.password)
            recorded = str(found[0][0]) if found else None
        return bool(exists), bool(has_rows), recorded

    def check_job(self, spark: SparkSession, resumes: bool) -> None:
        """Refuse the table where :func:`refuse_job` does (another job's rows; gone for a job that
        resumes), from the driver, before the query starts."""
        if self.job_id is None:
            return
        exists, has_rows, recorded = self.table_state(spark)
        refusal = refuse_job(self.table, self.job_id, resumes, exists, has_rows, recorded)
        if refusal is not None:
            raise refusal

    def columns(self, spark: SparkSession) -> dict[str, str]:
        """The table's columns and their types as ``format_type`` names them (none if it is missing)."""
        sql = ("SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
               f"WHERE a.attrelid = to_regclass('{self._qualified(self._name)}') AND a.attnum > 0 "
               "AND NOT a.attisdropped")
        return {str(name): str(kind) for name, kind in query_rows(spark, self.jdbc_url, sql, self.user, self.password)}

    def check_types(self, spark: SparkSession, fields: Sequence[T.StructField], batch_id: int
                    ) -> list[T.StructField]:
        """Refuse a batch whose values a column of the table would change in silence (:func:`holds`);
        the fields the table (if it exists) has no column for yet, which the batch adds, as an
        output's later batches may add columns on the other sinks."""
        table = self.columns(spark)
        if not table:
            return []
        for f in fields:
            column, values = table.get(f.name), format_name(postgres_type(f.dataType))
            if column is not None and not holds(column, values):
                raise OutputSchemaError(f"the PostgreSQL table {self.table}", batch_id, f.name, column.upper(),
                                        values.upper(), kept_by="the table has it as",
                                        fix=f"Return {column.upper()} values for it (or ALTER the column's TYPE)")
        new = [f for f in fields if f.name not in table]
        folded = {name.lower(): name for name in table}
        for f in new:  # an unquoted name in the table's DDL was folded to lower case: not a new column
            if f.name.lower() in folded:
                raise ConfigurationError("df", f"column {f.name!r} and the table's column {folded[f.name.lower()]!r} "
                                               f"differ only in case; rename one (PostgreSQL folds unquoted names "
                                               f"to lower case)")
        return new

    def _write(self, df: DataFrame, fields: list[T.StructField], batch_id: int) -> int:
        from pyspark.sql import functions as F

        check_jdbc_driver(df.sparkSession)
        new = self.check_types(df.sparkSession, fields, batch_id)
        props = {"user": self.user, "password": self.password}
        writer = (
            df.withColumn(SEQ, F.monotonically_increasing_id()).write.format("jdbc")
            .option("url", self.jdbc_url)
            .option("driver", _DRIVER)
            .option("dbtable", self.staging_table(batch_id))
        )
        for key, value in props.items():
            if value is not None:
                writer = writer.option(key, value)
        try:
            writer.mode("overwrite").save()
            faults.at("pg_staged", batch_id)
            counts = execute_statements(
                df.sparkSession,
                self.jdbc_url,
                self.statements(fields, batch_id, new),
                user=self.user,
                password=self.password,
                before_commit=lambda: faults.at("pg_uncommitted", batch_id),
            )
        except Exception:
            self._drop_stage(df.sparkSession, batch_id)
            raise
        return counts[-2]  # the upsert's

    def _drop_stage(self, spark: SparkSession, batch_id: int) -> None:
        """After a failed write (a constraint of the table's own, a value the server refuses, a task
        that failed mid-copy): drop the batch's staging table, which nothing else would drop unless
        the batch is replayed. Best effort: where the server itself is gone, so is the way to drop it,
        and the replay still overwrites it."""
        with contextlib.suppress(Exception):  # the write's own error is the one to report
            execute_statements(spark, self.jdbc_url, [f"DROP TABLE IF EXISTS {self.staging_table(batch_id)}"],
                               user=self.user, password=self.password)


def _decimal_places(values: Sequence[Any]) -> int | None:
    """The places of a ``NUMERIC`` that holds ``values`` exactly, where they are finite Decimals (and
    integers and nulls; at least one Decimal, at most 38 places); None otherwise (a DOUBLE: a sum of
    a DECIMAL field on the general path was written as one, its digits past 2**53 rounded)."""
    places = -1
    for v in values:
        if isinstance(v, Decimal):
            exponent = v.as_tuple().exponent
            if not isinstance(exponent, int):
                return None  # NaN, an infinity: not a NUMERIC Spark writes
            places = max(places, -exponent, 0)
        elif not (v is None or (isinstance(v, int) and not isinstance(v, bool))):
            return None
    return places if 0 <= places <= 38 else None


class PostgresSink(DataFrameSink):
    """The lowwater sink face of :class:`PostgresUpsertSink`: upsert on (key, window_start, window_end).

    On Spark, :meth:`write` receives the batch's results as a DataFrame and the executors copy
    them into the staging table over JDBC (only the upsert statement runs on the driver); the
    value keeps the aggregate's type (BIGINT for an integer sum, DOUBLE for avg...). Struct
    columns (Spark's ``window``) are left out: the table has ``window_start``/``window_end``.
    The reference runtime's rows become a small DataFrame first. A re-firing replaces the
    earlier row. A process function's rows need ``key``, ``window_start`` and ``window_end``; a
    window function does not know its firing's ``fire_index``, so rows without one get 0, and the
    later of two rows of a window replaces the earlier (until session 65 they failed the first
    batch that fired a window: a user probe). The session must have the JDBC driver jar; without it
    :meth:`open` fails with the fix.

    The job that writes the table is recorded beside it (:meth:`bind_job`; :data:`JOBS_TABLE`, the
    module docstring). Before the query starts, a job on a new checkpoint, and every reference run,
    refuses a table that holds another job's rows, or rows no job recorded; a job that resumes
    refuses a table that another job's rows are in, or that it wrote and is gone (:func:`refuse_job`).
    """

    reads_every_row = True  # one df.write (DataFrameSink.reads_every_row)
    window_results_only = True  # refused on a late output or the dead letters (check_takes_output)

    def __init__(self, jdbc_url: str, table: str, user: str | None = None, password: str | None = None) -> None:
        self.upsert = PostgresUpsertSink(jdbc_url, table, user=user, password=password)

    def __repr__(self) -> str:
        return f"PostgresSink({mask_jdbc_url(repr(self.upsert.jdbc_url))}, {self.upsert.table!r})"

    def bind_job(self, job_id: str | None, resumes: bool = True) -> None:
        """The job whose id the table records at its first write. A reference run (``resumes``
        False) is a new job every time: its table is checked here, before a batch (on Spark,
        :func:`check_jobs` checks it, knowing whether the checkpoint has committed batches)."""
        self.upsert.job_id = job_id
        if not resumes and job_id is not None:
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
            self.open()
            self.upsert.check_table(spark)
            self.upsert.check_job(spark, resumes=False)

    def batch_target(self) -> str:
        """The table: rows of two outputs upserted on one (key, window_start, window_end) would replace each other."""
        return f"the PostgreSQL table {self.upsert.table} at {mask_jdbc_url(self.upsert.jdbc_url)}"

    def open(self) -> None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is not None:
            check_jdbc_driver(spark)

    def check_before_run(self) -> None:
        """The driver's check (:meth:`open`) and the table's (:meth:`PostgresUpsertSink.check_table`),
        before the query starts: at the first batch's writes they came after the batch had been
        computed and the other sinks had written it."""
        from pyspark.sql import SparkSession

        self.open()
        spark = SparkSession.getActiveSession()
        if spark is not None:
            self.upsert.check_table(spark)

    def write(self, df: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        flat: list[Column | str] = [f.name for f in df.schema.fields
                                    if not isinstance(f.dataType, (T.StructType, T.ArrayType, T.MapType))]
        if FIRE_INDEX not in df.columns:  # a process function's rows: the later of a window's rows is its latest
            flat.append(F.lit(0).cast("int").alias(FIRE_INDEX))
        self.upsert.write(df.select(*flat), batch_id)

    def write_batch(self, batch_id: int, rows: Sequence[Any]) -> None:
        from pyspark.sql import SparkSession

        from lowwater.spark.sinks.base import to_dict

        records = [to_dict(r) for r in rows]
        if not records:
            return
        missing = [c for c in RESULT_FIELDS if any(c not in r for r in records)]
        if missing:  # a late output's elements, a process function's values: not a window's results
            raise ConfigurationError("rows", f"window results need the fields {missing} (a row has "
                                             f"{sorted(next(r for r in records if any(c not in r for c in missing)))})")
        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        values = [r["value"] for r in records]
        integral = all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in values)
        places = _decimal_places(values)
        value_type = "BIGINT" if integral else "DOUBLE" if places is None else f"DECIMAL(38,{places})"
        schema = f"key STRING, window_start BIGINT, window_end BIGINT, value {value_type}, fire_index INT"
        data = [(str(r["key"]), int(r["window_start"]), int(r["window_end"]),
                 None if r["value"] is None else (r["value"] if integral else float(r["value"]) if places is None
                                                  else Decimal(r["value"])),
                 int(r["fire_index"])) for r in records]
        self.upsert.write(spark.createDataFrame(data, schema), batch_id)


def check_jobs(sinks: Sequence[Any], resumes: bool) -> None:
    """Before a Spark job's query starts, after :meth:`PostgresSink.check_before_run`: refuse the
    table of each :class:`PostgresSink` bound to the job where :func:`refuse_job` does; ``resumes``:
    the job's checkpoint has committed batches."""
    from pyspark.sql import SparkSession

    postgres = [s for s in sinks if isinstance(s, PostgresSink) and s.upsert.job_id is not None]
    spark = SparkSession.getActiveSession()
    if spark is None or not postgres:
        return
    for sink in postgres:
        sink.upsert.check_job(spark, resumes)

"""Create the SparkSession lowwater runs on, and find the PostgreSQL JDBC driver.

Spark starts slowly (seconds), so create one session per process and reuse it:
:func:`get_or_create_session` returns the active session if there is one. JVM-level settings
(the class path, the master) only take effect for the first session of a process.

JDBC drivers are put on the driver's class path from local jar files (``jars``). Maven
coordinates (``spark.jars.packages``) are not used: they need a download at start-up.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_SHUFFLE_PARTITIONS", "DELTA_SNAPSHOT_PARTITIONS", "get_or_create_session", "postgres_jdbc_jar",
           "settings_for"]

LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")

#: Spark's default of 200 shuffle partitions is far too many for micro-batches on one machine.
DEFAULT_SHUFFLE_PARTITIONS = 4

#: The tasks Delta reads a table's state with (its files, the ``txnAppId`` versions that make
#: :class:`~lowwater.spark.sinks.DeltaSink`'s writes idempotent): 50 by default, meant for a
#: cluster. On a local master each of them generated the code of Delta's wide action rows again:
#: the Delta sink's tests took 120 s with 50 and 70-83 s with 4 (docs/cluster.md).
DELTA_SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"

#: Where Debian's ``libpostgresql-jdbc-java`` puts the driver (see scripts/ensure_postgres.sh).
_DEBIAN_JDBC_JARS = ("/usr/share/java/postgresql.jar", "/usr/share/java/postgresql-*.jar")


def postgres_jdbc_jar() -> str | None:
    """Path of the PostgreSQL JDBC driver jar, or None if it is not installed.

    ``LOWWATER_POSTGRES_JDBC_JAR`` names a jar explicitly; otherwise Debian's
    ``/usr/share/java/postgresql.jar`` (package ``libpostgresql-jdbc-java``) is used.
    """
    explicit = os.environ.get("LOWWATER_POSTGRES_JDBC_JAR")
    if explicit:
        return explicit if os.path.isfile(explicit) else None
    for pattern in _DEBIAN_JDBC_JARS:
        for path in sorted(glob.glob(pattern)):
            if os.path.isfile(path):
                return path
    return None


@contextlib.contextmanager
def settings_for(session: SparkSession, settings: Mapping[str, str]) -> Iterator[SparkSession]:
    """``session`` with ``settings`` for the duration of the block, put back as found after it
    (a setting the session did not have is unset again)."""
    before = {k: session.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        session.conf.set(k, v)
    try:
        yield session
    finally:
        for k, was in before.items():
            if was is None:
                session.conf.unset(k)
            else:
                session.conf.set(k, was)


STAGE_IDS_IN_CLASS_NAMES = "spark.sql.codegen.useIdInClassName"


def share_generated_classes(session: SparkSession) -> None:
    """Let each batch's queries reuse the classes Spark generated for an earlier batch's query of
    the same shape, unless the session was told otherwise.

    Spark caches compiled classes by their source, and by default names a whole-stage class after
    its stage's id in the plan. Adaptive execution numbers stages as it re-plans a query, which
    depends on which of its stages finished first: the same code came with another id now and then,
    missed the cache and was compiled again (6 classes in one batch of a late re-firing test, a
    run in three; none in eight runs without the id, session 61). The setting is internal to
    Spark and changes nothing but those names. It stays set on the session after the job. (Asked
    of the JVM's own config: PySpark's ``conf.getAll`` ends on a Java exception that PySpark converts,
    about 166 ms of the JVM's CPU, ``tests/spark/test_observe.py``.)
    """
    if not session.conf._jconf.contains(STAGE_IDS_IN_CLASS_NAMES):
        session.conf.set(STAGE_IDS_IN_CLASS_NAMES, "false")


def get_or_create_session(
    master: str | None = None,
    app_name: str = "lowwater",
    jars: Iterable[str] = (),
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return the active SparkSession, or start one configured for lowwater.

    What the user configured wins over lowwater's defaults:

    * an active session is returned as it is (a warning names any requested jar it lacks);
    * under ``spark-submit``, its ``--master`` and every ``--conf`` it was given are kept,
      and lowwater's defaults only fill in the settings it left out. Its JVM's class path is
      already fixed, so lowwater's own jars (``jars/spark``: Kafka connector, Delta) are not
      added: pass them with ``--jars`` or ``--packages``; Delta's SQL extension is set when
      Delta's jar is among them;
    * otherwise the master is ``master`` if given, else the env var ``LOWWATER_SPARK_MASTER``,
      else ``local[*]``.

    lowwater's defaults: ``spark.sql.shuffle.partitions`` = :data:`DEFAULT_SHUFFLE_PARTITIONS`,
    on a local master Delta's ``spark.databricks.delta.snapshotPartitions`` the same (50 by
    default: :data:`DELTA_SNAPSHOT_PARTITIONS`), ``spark.sql.session.timeZone`` = ``UTC``, log
    level WARN, and Spark's status store capped at 200 jobs, stages and SQL executions (1000 by
    default). The web UI stays as Spark has it (on); pass ``conf={"spark.ui.enabled": "false"}`` to turn it off. With
    ``LOWWATER_JVM_ARCHIVE_DIR`` set, the driver maps a class archive built for its class path
    (:mod:`lowwater.spark.class_archive`), which halves its start-up CPU.
    * ``jars``: local jar files (e.g. :func:`postgres_jdbc_jar`) put on the driver and executor
      class path and shipped with ``spark.jars``. On the driver's system class path a JDBC
      driver is visible to ``java.sql.DriverManager``, which the JDBC sinks use directly.
    * ``conf``: any further Spark settings; they win over the defaults above.

    For local masters, ``PYSPARK_PYTHON`` defaults to this interpreter and the driver binds
    to 127.0.0.1 (``SPARK_LOCAL_IP`` defaults to it). If a session is already active, its JVM
    settings (class path, master) cannot change: a warning names any requested jar it lacks.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        _warn_lacking(active, [os.path.abspath(j) for j in jars])
        return active
    submitted = _spark_submit_conf()  # None unless this process was started by spark-submit
    if master is None and submitted is None:
        master = os.environ.get("LOWWATER_SPARK_MASTER") or "local[*]"
    if master is None:
        master = submitted.get("spark.master", "local[*]") if submitted is not None else "local[*]"
    jars = [os.path.abspath(j) for j in jars]
    from lowwater.spark.jvm import jars_conf, spark_jars  # Kafka connector, Delta: fetched by ./dev (pom.xml)

    if submitted is None:  # under spark-submit the driver's class path is what it was given (below)
        jars += [j for j in spark_jars() if j not in jars]
    missing = [j for j in jars if not os.path.isfile(j)]
    if missing:
        raise FileNotFoundError(f"jar(s) not found: {', '.join(missing)}")

    settings: dict[str, str] = {
        "spark.sql.shuffle.partitions": str(DEFAULT_SHUFFLE_PARTITIONS),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        # Spark's status store keeps this many jobs, stages and SQL executions even with the UI
        # off; a micro-batch runs several, so the default 1000 fills only after hundreds of
        # batches (measured in the soak, docs/reliability.md): cap the driver's heap sooner
        "spark.ui.retainedJobs": "200",
        "spark.ui.retainedStages": "200",
        "spark.sql.ui.retainedExecutions": "200",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2}",
    }
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # read by the JVM at launch
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings[DELTA_SNAPSHOT_PARTITIONS] = str(DEFAULT_SHUFFLE_PARTITIONS)
    if jars:
        settings["spark.jars"] = ",".join(jars)
        settings["spark.driver.extraClassPath"] = os.pathsep.join(jars)
        settings["spark.executor.extraClassPath"] = os.pathsep.join(jars)
    if submitted is None:
        settings.update(jars_conf(jars))  # Delta's extension and catalog, when its jar is there
    else:
        # spark-submit started the driver's JVM: jars named now would reach the executors but not
        # the driver, whose class loader then could not load Delta's SQL extension (the session
        # failed to start). So lowwater's own jars are left to spark-submit's --jars or
        # --packages, and Delta's settings follow the jars spark-submit was given.
        given = [j for j in submitted.get("spark.jars", "").split(",") if j]
        settings.update(jars_conf([*given, *jars]))
    if submitted is not None:  # spark-submit's own settings win; ours fill the gaps
        for key in [k for k in settings if k in submitted]:
            if key in ("spark.jars", "spark.driver.extraClassPath", "spark.executor.extraClassPath"):
                settings[key] = _join_paths(submitted[key], settings[key], "," if key == "spark.jars" else os.pathsep)
            else:
                del settings[key]
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    if submitted is None:  # a JVM we start: map the class archive for its class path, if built
        from lowwater.spark.class_archive import driver_options, dump_option

        extra = [*driver_options(settings.get("spark.driver.extraClassPath", "")), *dump_option()]
        if extra:
            settings["spark.driver.extraJavaOptions"] = " ".join(
                [settings.get("spark.driver.extraJavaOptions", ""), *extra]).strip()

    builder = SparkSession.builder.appName(app_name)
    if submitted is None or "spark.master" not in submitted:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _spark_submit_conf() -> dict[str, str] | None:
    """The settings spark-submit gave this process (its JVM is already running, and
    ``PYSPARK_GATEWAY_PORT`` points at it), or ``None`` outside spark-submit."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; starts nothing
    return dict(SparkConf().getAll())


def _join_paths(first: str, second: str, sep: str) -> str:
    parts = [p for p in first.split(sep) if p]
    return sep.join(parts + [p for p in second.split(sep) if p and p not in parts])


def _warn_lacking(spark: SparkSession, jars: list[str]) -> None:
    if not jars:
        return
    have = spark.sparkContext.getConf().get("spark.driver.extraClassPath", "") or ""
    lacking = [j for j in jars if j not in have.split(os.pathsep)]
    if lacking:
        warnings.warn(
            f"a SparkSession was already running without {', '.join(lacking)} on its "
            "class path; stop it first (spark.stop()) to start one with these jars",
            RuntimeWarning,
            stacklevel=3,
        )

"""Fixtures for the Spark tests: ONE SparkSession and ONE PostgreSQL server per test session
(under ``./dev test``'s pytest-xdist, one of each per worker).

Both fail (never skip) when something is missing, with what to run to fix it.

Every test shares the session, so none may leave it changed: after each test that used it,
:func:`the_session_is_left_as_found` stops any streaming query still running (and fails the
test that left it: it would go on using CPU, and compile code, under the tests after it) and
puts back any SQL setting the test changed.
"""

from __future__ import annotations

import json
import os
import warnings
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest

from lowwater.spark.session import LOG4J2, get_or_create_session, postgres_jdbc_jar, share_generated_classes

try:  # tests/ is a package if someone added tests/__init__.py, else tests/ is on sys.path
    from tests.pg_server import PgServer, postgres_server
except ImportError:
    from pg_server import PgServer, postgres_server  # type: ignore[no-redef]

_FIX = "run: bash scripts/ensure_postgres.sh (as root it installs the Debian packages)"


JIT_OPTIONS = ("-XX:Tier4InvocationThreshold=15000 -XX:Tier4MinInvocationThreshold=1800 "
               "-XX:Tier4CompileThreshold=45000 -XX:Tier4BackEdgeThreshold=120000")
"""C2 compiles a method after three times the calls and loops it takes by default (5000, 600,
15000, 40000): the suite runs many short queries, and C2's compiler thread was the test
session's largest user of CPU (docs/testing.md)."""


def _jvm_conf() -> dict[str, str]:
    """The test session's JVM keeps both of the JVM's compilers, with :data:`JIT_OPTIONS`: unlike
    the short-lived crash jobs' JVMs (``crash_series.JVM_OPTIONS``, C1 only), it lives for the
    whole suite, and C1 only made the suite slower (docs/testing.md).
    ``LOWWATER_TEST_JVM_OPTIONS`` replaces :data:`JIT_OPTIONS`, to try others."""
    options = os.environ.get("LOWWATER_TEST_JVM_OPTIONS", JIT_OPTIONS)
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2} {options}".strip(),
            **local_file_system_conf()}


LOCAL_FS_CLASS = "dev.lowwater.LocalFileSystemWithoutForks"


def local_file_system_conf() -> dict[str, str]:
    """``file:`` through Hadoop's local file system without the ``chmod`` and ``readlink``
    processes it forks (``jvm/lowwater/src/dev/lowwater/LocalFileSystemWithoutForks.java``): about
    350 a short streaming query, a tenth of the suite's CPU (docs/testing.md). Only for the test
    session, and only when ``jars/spark/lowwater-jvm.jar`` (built by ``./dev setup``) has the class."""
    from lowwater.spark.jvm import spark_jars

    entry = LOCAL_FS_CLASS.replace(".", "/") + ".class"
    for jar in spark_jars():
        if os.path.basename(jar) == "lowwater-jvm.jar":
            with zipfile.ZipFile(jar) as z:
                if entry in z.namelist():
                    return {"spark.hadoop.fs.file.impl": LOCAL_FS_CLASS,
                            "spark.hadoop.fs.AbstractFileSystem.file.impl": LOCAL_FS_CLASS + "$Fs"}
    return {}


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    jar = postgres_jdbc_jar()
    if jar is None:
        pytest.fail(f"PostgreSQL JDBC driver /usr/share/java/postgresql.jar not found; {_FIX}")
    conf = {"spark.ui.enabled": "false", **_jvm_conf()}
    session = get_or_create_session(app_name="lowwater-tests", jars=[jar], conf=conf)
    try:
        session._jvm.java.lang.Class.forName("org.postgresql.Driver")
    except Exception as e:  # an earlier session without the jar, for instance
        pytest.fail(f"the SparkSession cannot load org.postgresql.Driver ({e}); {_FIX}")
    share_generated_classes(session)  # as every job leaves it (lowwater.spark.session), so no test is seen to change it
    yield session
    session.stop()


# set by Spark and Delta themselves: on the session's first use, and on each Delta commit
_SET_BY_SPARK = frozenset({"spark.sql.parquet.fieldId.read.enabled", "spark.sql.parquet.fieldId.write.enabled",
                           "spark.databricks.delta.lastCommitVersionInSession"})


_JSON: dict[int, tuple[Any, Any]] = {}


def _settings(session: Any) -> dict[str, str]:
    """``session.conf.getAll`` as JSON, in three py4j calls. ``dict(session.conf.getAll)`` takes two
    calls per setting and ends on a Java exception (the end of the map's iterator), which PySpark's
    error conversion checks against 14 classes looked up through py4j: about 40 ms a call, twice a
    test, a minute of the suite's CPU."""
    jvm = session._jvm
    got = _JSON.get(id(jvm))
    if got is None or got[0] is not jvm:  # the entry holds its JVM view, so no other can take its id
        got = _JSON[id(jvm)] = (jvm, jvm.com.fasterxml.jackson.databind.ObjectMapper())
    return dict(json.loads(got[1].writeValueAsString(session.conf._jconf.getAllAsJava())))


@pytest.fixture(autouse=True)
def the_session_is_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    if "spark" not in request.fixturenames:
        yield
        return
    session: Any = request.getfixturevalue("spark")
    before = _settings(session)
    yield
    left = session.streams.active
    for query in left:
        query.stop()
    after = _settings(session)
    changed = sorted(k for k in before.keys() | after.keys()
                     if before.get(k) != after.get(k) and k not in _SET_BY_SPARK)
    for key in changed:
        if key in before:
            session.conf.set(key, before[key])
        else:
            session.conf.unset(key)
    if changed:
        warnings.warn(f"{request.node.nodeid} changed the shared session's settings {changed}; put back",
                      stacklevel=1)
    assert not left, f"streaming queries left running (stopped now): {[q.name or q.id for q in left]}"


@pytest.fixture(scope="session")
def pg() -> Iterator[PgServer]:
    try:
        with postgres_server() as server:
            yield server
    except Exception as e:
        if isinstance(e, pytest.fail.Exception):
            raise
        pytest.fail(f"could not start a PostgreSQL server for the tests: {e}")

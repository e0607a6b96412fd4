"""Fixtures for the Spark tests: ONE SparkSession and ONE PostgreSQL server per test session.

Both fail (never skip) when something is missing, with what to run to fix it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from lowwater.spark.session import LOG4J2, get_or_create_session, postgres_jdbc_jar

try:  # tests/ is a package if someone added tests/__init__.py, else tests/ is on sys.path
    from tests.pg_server import PgServer, postgres_server
except ImportError:
    from pg_server import PgServer, postgres_server  # type: ignore[no-redef]

_FIX = "run: bash scripts/ensure_postgres.sh (as root it installs the Debian packages)"


def _jvm_conf() -> dict[str, str]:
    """The test session's JVM runs with the JVM's own options: unlike the short-lived crash jobs'
    JVMs (``crash_series.JVM_OPTIONS``, C1 only), it lives for the whole suite, and C1 only made
    the suite slower (docs/testing.md). ``LOWWATER_TEST_JVM_OPTIONS`` adds options to try."""
    options = os.environ.get("LOWWATER_TEST_JVM_OPTIONS", "")
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J2} {options}".strip()}


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
    yield session
    session.stop()


@pytest.fixture(scope="session")
def pg() -> Iterator[PgServer]:
    try:
        with postgres_server() as server:
            yield server
    except Exception as e:
        if isinstance(e, pytest.fail.Exception):
            raise
        pytest.fail(f"could not start a PostgreSQL server for the tests: {e}")

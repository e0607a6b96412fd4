"""PostgresUpsertSink against a real PostgreSQL server (fixtures in conftest.py)."""

from __future__ import annotations

import pytest

from lowwater.core.errors import ConfigurationError
from lowwater.spark.sinks import PostgresUpsertSink
from lowwater.spark.sinks.postgres import execute_statements

pytestmark = pytest.mark.spark

WINDOW = "key string, window_start long, window_end long, value double"
SCHEMA = f"{WINDOW}, fire_index int, batch_id long"


def _sink(pg, table):
    return PostgresUpsertSink(pg.jdbc_url, table, user=pg.user)


def _write(spark, sink, batch_id, rows):
    """rows: (key, window_start, window_end, value, fire_index); batch_id is added."""
    df = spark.createDataFrame([(*r, batch_id) for r in rows], SCHEMA)
    return sink.write(df, batch_id)


def _query(spark, pg, sql):
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    props.setProperty("user", pg.user)
    conn = jvm.java.sql.DriverManager.getConnection(pg.jdbc_url, props)
    try:
        rs = conn.createStatement().executeQuery(sql)
        width = rs.getMetaData().getColumnCount()
        out = []
        while rs.next():
            out.append(tuple(rs.getObject(i) for i in range(1, width + 1)))
        return out
    finally:
        conn.close()


def _contents(spark, pg, table):
    return _query(
        spark,
        pg,
        "SELECT key, window_start, window_end, value, fire_index, batch_id "
        f"FROM {table} ORDER BY key, window_start",
    )


def _staging_tables(spark, pg):
    sql = "SELECT tablename FROM pg_tables WHERE strpos(tablename, '__stage_') > 0"
    return _query(spark, pg, sql)


def test_first_write_creates_the_table_with_a_primary_key(spark, pg):
    sink = _sink(pg, "first_write")
    n = _write(spark, sink, 0, [("a", 0, 10, 1.0, 0), ("b", 0, 10, 2.0, 0), ("a", 10, 20, 3.0, 0)])

    assert n == 3
    assert _contents(spark, pg, "first_write") == [
        ("a", 0, 10, 1.0, 0, 0),
        ("a", 10, 20, 3.0, 0, 0),
        ("b", 0, 10, 2.0, 0, 0),
    ]
    types = _query(
        spark,
        pg,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = 'first_write' ORDER BY ordinal_position",
    )
    assert types == [
        ("key", "text"),
        ("window_start", "bigint"),
        ("window_end", "bigint"),
        ("value", "double precision"),
        ("fire_index", "integer"),
        ("batch_id", "bigint"),
    ]
    pk = _query(
        spark,
        pg,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
        "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = 'first_write'::regclass AND i.indisprimary ORDER BY a.attnum",
    )
    assert pk == [("key",), ("window_start",), ("window_end",)]
    assert _staging_tables(spark, pg) == []


def test_refiring_replaces_the_value(spark, pg):
    sink = _sink(pg, "refire")
    _write(spark, sink, 0, [("a", 0, 10, 1.0, 0), ("b", 0, 10, 2.0, 0)])
    n = _write(spark, sink, 1, [("a", 0, 10, 5.0, 1), ("c", 0, 10, 7.0, 0)])

    assert n == 2
    assert _contents(spark, pg, "refire") == [
        ("a", 0, 10, 5.0, 1, 1),
        ("b", 0, 10, 2.0, 0, 0),
        ("c", 0, 10, 7.0, 0, 1),
    ]


def test_replaying_a_batch_leaves_the_table_unchanged(spark, pg):
    sink = _sink(pg, "replay")
    _write(spark, sink, 0, [("a", 0, 10, 1.0, 0), ("b", 0, 10, 2.0, 0)])
    batch1 = [("a", 0, 10, 4.0, 1), ("b", 10, 20, 3.0, 0)]
    first = _write(spark, sink, 1, batch1)
    after_first = _contents(spark, pg, "replay")

    # A crash after staging but before the upsert left a partial staging table behind.
    execute_statements(
        spark,
        pg.jdbc_url,
        [
            f"CREATE TABLE {sink.staging_table(1)} AS SELECT * FROM replay WHERE false",
            f"INSERT INTO {sink.staging_table(1)} VALUES ('zzz', 0, 10, 99.0, 9, 1)",
        ],
        user=pg.user,
    )
    replayed = _write(spark, sink, 1, batch1)

    assert replayed == first == 2
    assert (
        _contents(spark, pg, "replay")
        == after_first
        == [
            ("a", 0, 10, 4.0, 1, 1),
            ("b", 0, 10, 2.0, 0, 0),
            ("b", 10, 20, 3.0, 0, 1),
        ]
    )
    assert _staging_tables(spark, pg) == []


def test_an_older_firing_never_overwrites_a_newer_one(spark, pg):
    sink = _sink(pg, "stale")
    _write(spark, sink, 0, [("a", 0, 10, 9.0, 2)])
    assert _write(spark, sink, 1, [("a", 0, 10, 1.0, 1)]) == 0
    assert _contents(spark, pg, "stale") == [("a", 0, 10, 9.0, 2, 0)]

    # Within one batch the highest firing of a window wins, whatever the row order.
    n = _write(spark, sink, 2, [("b", 0, 10, 5.0, 3), ("b", 0, 10, 1.0, 0), ("b", 0, 10, 2.0, 1)])
    assert n == 1
    assert _contents(spark, pg, "stale")[1] == ("b", 0, 10, 5.0, 3, 2)


@pytest.mark.parametrize(
    "table", ["results; DROP TABLE x", "1results", "a.b.c", "", 'we"ird', "x" * 64]
)
def test_an_invalid_table_name_is_a_configuration_error(table):
    with pytest.raises(ConfigurationError) as err:
        PostgresUpsertSink("jdbc:postgresql://127.0.0.1:5432/db", table)
    assert err.value.parameter == "table"


def test_results_without_fire_index_are_a_configuration_error(spark, pg):
    df = spark.createDataFrame([("a", 0, 10, 1.0)], WINDOW)
    with pytest.raises(ConfigurationError, match="fire_index"):
        _sink(pg, "no_fire_index").write(df, 0)

"""PostgresUpsertSink against a real PostgreSQL server (fixtures in conftest.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from lowwater.core.errors import ConfigurationError, OutputSchemaError
from lowwater.spark.sinks import PostgresSink, PostgresUpsertSink
from lowwater.spark.sinks.postgres import execute_statements, holds, query_rows

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
    return query_rows(spark, pg.jdbc_url, sql, user=pg.user)


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


def test_of_two_rows_of_a_window_with_one_fire_index_the_batch_s_later_one_is_kept(spark, pg):
    """A process function's rows carry the fire_index their user gave them (0, say): of a window that
    fired twice in one batch, the later row is its latest firing. The tie went to the larger values
    (``ORDER BY ..., value DESC``), so the table kept the older firing (a user probe, session 65)."""
    sink = _sink(pg, "same_fire_index")
    rows = [("a", 0, 10, 1.0, 0), ("b", 0, 10, 9.0, 0), ("a", 0, 10, 9.0, 0), ("b", 0, 10, 3.0, 0)]
    df = spark.createDataFrame([(*r, 0) for r in rows], SCHEMA).coalesce(1)
    assert sink.write(df, 0) == 2
    assert _contents(spark, pg, "same_fire_index") == [("a", 0, 10, 9.0, 0, 0), ("b", 0, 10, 3.0, 0, 0)]
    assert _write(spark, sink, 1, [("b", 0, 10, 1.0, 0)]) == 1, "a later batch's row, the same fire_index"
    assert _contents(spark, pg, "same_fire_index")[1] == ("b", 0, 10, 1.0, 0, 1)


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


def _result(key, value, fire_index=0):
    return {"key": key, "window_start": 0, "window_end": 10, "value": value, "fire_index": fire_index}


def test_a_batch_whose_values_the_tables_column_would_round_fails_and_writes_nothing(spark, pg):
    # The general path writes a batch of rows; whole sums made the value column BIGINT, and
    # PostgreSQL would store a later 2.5 in it as 2.
    sink = PostgresSink(pg.jdbc_url, "widening", user=pg.user)
    sink.write_batch(0, [_result("a", 3)])
    with pytest.raises(OutputSchemaError) as err:
        sink.write_batch(1, [_result("b", 2.5), _result("a", 4.5, 1)])
    assert err.value.field == "value"
    assert "BIGINT column" in str(err.value) and "DOUBLE PRECISION values" in str(err.value)
    assert _query(spark, pg, "SELECT key, value, fire_index FROM widening ORDER BY key") == [("a", 3, 0)]
    assert _staging_tables(spark, pg) == []

    # A DOUBLE PRECISION column takes whole numbers as they are.
    doubles = PostgresSink(pg.jdbc_url, "widening_ok", user=pg.user)
    doubles.write_batch(0, [_result("a", 2.5)])
    doubles.write_batch(1, [_result("b", 3), _result("c", 2**53)])
    assert _query(spark, pg, "SELECT key, value FROM widening_ok ORDER BY key") == [
        ("a", 2.5), ("b", 3.0), ("c", float(2**53))]


def test_the_general_path_s_decimal_sums_are_a_numeric_column_exactly(spark, pg):
    # A DECIMAL field's sums on the general path are Decimals; they were written as DOUBLE PRECISION
    # (cents past 2**53 rounded), now as the NUMERIC their places need, integers beside them too.
    sink = PostgresSink(pg.jdbc_url, "decimal_sums", user=pg.user)
    big = Decimal("90071992547409.93")  # 2**53 cents and more: not a double
    sink.write_batch(0, [_result("a", big), _result("b", 3), _result("c", None)])
    assert _query(spark, pg, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE "
                             "attrelid = 'decimal_sums'::regclass AND attname = 'value'") == [("numeric(38,2)",)]
    assert _query(spark, pg, "SELECT key, value FROM decimal_sums ORDER BY key") == [
        ("a", big), ("b", Decimal("3.00")), ("c", None)]
    with pytest.raises(OutputSchemaError, match=r"NUMERIC\(38,3\) values, where the table has it as a "
                                                r"NUMERIC\(38,2\) column"):
        sink.write_batch(1, [_result("d", Decimal("0.125"))])  # would be rounded to cents


def test_a_table_made_beforehand_takes_what_its_columns_hold_and_refuses_rounding(spark, pg):
    execute_statements(spark, pg.jdbc_url, [
        "CREATE TABLE premade (key varchar(64) NOT NULL, window_start bigint NOT NULL, window_end bigint NOT NULL, "
        "value numeric(12,2), fire_index bigint, PRIMARY KEY (key, window_start, window_end))"], user=pg.user)
    sink = _sink(pg, "premade")
    exact = spark.createDataFrame([("a", 0, 10, Decimal("7.00"), 0)], "key string, window_start long, window_end long, "
                                                       "value decimal(10,2), fire_index int")
    assert sink.write(exact, 0) == 1
    with pytest.raises(OutputSchemaError, match=r"field value holds DOUBLE PRECISION values, where the table has it "
                                                r"as a NUMERIC\(12,2\) column.*ALTER"):
        sink.write(spark.createDataFrame([("a", 0, 10, 7.125, 1)], f"{WINDOW}, fire_index int"), 1)
    assert [(k, float(v), f) for k, v, f in _query(spark, pg, "SELECT key, value, fire_index FROM premade")] == [
        ("a", 7.0, 0)]


def test_a_write_the_table_refuses_fails_naming_it_and_leaves_no_staging_table(spark, pg):
    """A constraint of the table's own (here a CHECK) fails the upsert after the batch was staged;
    the failed write drops its staging table, which only a replay of that batch would drop."""
    execute_statements(spark, pg.jdbc_url, [
        "CREATE TABLE checked (key text NOT NULL, window_start bigint NOT NULL, window_end bigint NOT NULL, "
        "value double precision CHECK (value < 100), fire_index integer, batch_id bigint, "
        "PRIMARY KEY (key, window_start, window_end))"], user=pg.user)
    sink = _sink(pg, "checked")
    with pytest.raises(Exception, match=r"PostgreSQL upsert into checked .*failed \(batch 3\).*checked_value_check"):
        _write(spark, sink, 3, [("a", 0, 10, 150.0, 0)])
    assert _staging_tables(spark, pg) == []
    assert _write(spark, sink, 4, [("a", 0, 10, 50.0, 0)]) == 1
    assert _contents(spark, pg, "checked") == [("a", 0, 10, 50.0, 0, 4)]


@pytest.mark.parametrize(("column", "values", "expected"), [
    ("bigint", "bigint", True),
    ("bigint", "double precision", False),  # 2.5 would be stored as 2
    ("integer", "bigint", True),  # too large a value fails loudly: integer out of range
    ("double precision", "bigint", True),
    ("double precision", "numeric(38,18)", True),
    ("double precision", "real", True),
    ("real", "double precision", False),
    ("numeric(12,2)", "numeric(10,2)", True),
    ("numeric(12,2)", "numeric(10,3)", False),  # rounded to cents
    ("numeric(12,2)", "double precision", False),
    ("numeric", "numeric(38,18)", True),
    ("numeric(20,0)", "bigint", True),
    ("text", "bigint", True),
    ("character varying(64)", "text", True),
    ("text", "bytea", False),
    ("timestamp without time zone", "timestamp with time zone", False),  # shifted to the session's zone
    ("date", "timestamp without time zone", False),
    ("boolean", "bigint", False),
])
def test_which_batch_types_a_column_holds_without_change(column, values, expected):
    assert holds(column, values) is expected


def test_rows_that_are_not_window_results_are_a_configuration_error(spark, pg):
    # a PostgresSink on a late output gets its elements; it failed with KeyError: 'window_start'
    with pytest.raises(ConfigurationError, match=r"window results need the fields \['window_start', 'window_end', "
                                                 r"'fire_index'\] \(a row has \['key', 'ts', 'value'\]\)"):
        PostgresSink(pg.jdbc_url, "late_rows", user=pg.user).write_batch(0, [_result("a", 1), {"key": "a", "ts": 5,
                                                                                              "value": 2}])
    assert _query(spark, pg, "SELECT to_regclass('late_rows') IS NULL") == [(True,)]


def test_a_batch_that_brings_a_new_column_adds_it_to_the_table(spark, pg):
    # as an output's later batches may add columns on the other sinks (a process function's field
    # first given a value); the INSERT named a column the table did not have, and the batch failed
    sink = _sink(pg, "grows")
    _write(spark, sink, 0, [("a", 0, 10, 1.0, 0)])
    later = spark.createDataFrame([("b", 0, 10, 2.0, 0, 1, "first note")], f"{SCHEMA}, note string")
    assert sink.write(later, 1) == 1
    assert sink.write(later, 1) == 1  # a replay: the column is there
    assert _query(spark, pg, "SELECT key, value, batch_id, note FROM grows ORDER BY key") == [
        ("a", 1.0, 0, None), ("b", 2.0, 1, "first note")]
    assert _staging_tables(spark, pg) == []
    # a column that differs from the table's only in case is no new column, but a mistake
    cased = spark.createDataFrame([("c", 0, 10, 3.0, 0, 2, "x")], f"{SCHEMA}, Note string")
    with pytest.raises(ConfigurationError, match="column 'Note' and the table's column 'note' differ only in case"):
        sink.write(cased, 2)


def test_a_table_without_the_upserts_key_or_a_server_that_refuses_is_refused_before_the_run(spark, pg):
    """``check_before_run``: a table made beforehand without a unique constraint on (key, window_start,
    window_end), and a role the server does not know, failed the first batch's write (PostgreSQL's
    "there is no unique or exclusion constraint matching the ON CONFLICT specification", its staging
    table left behind) after the batch had been computed and the other sinks had written it."""
    execute_statements(spark, pg.jdbc_url, [
        "CREATE TABLE nokey (key text, window_start bigint, window_end bigint, value double precision, "
        "fire_index int)",
        "CREATE TABLE keyed_by_two (key text, window_start bigint, window_end bigint, value double precision, "
        "fire_index int, UNIQUE (key, window_start))",
        "CREATE TABLE unique_keys (key text NOT NULL, window_start bigint NOT NULL, window_end bigint NOT NULL, "
        "value double precision, fire_index int, UNIQUE (window_end, key, window_start))"], user=pg.user)
    for table in ("nokey", "keyed_by_two"):
        with pytest.raises(ConfigurationError, match=rf"{table} exists without a primary key or unique constraint "
                                                     r"on \(key, window_start, window_end\).*ADD PRIMARY KEY") as e:
            PostgresSink(pg.jdbc_url, table, user=pg.user).check_before_run()
        assert e.value.parameter == "table"
    PostgresSink(pg.jdbc_url, "unique_keys", user=pg.user).check_before_run()  # any order of the columns
    PostgresSink(pg.jdbc_url, "not_made_yet", user=pg.user).check_before_run()  # the first write makes it
    with pytest.raises(ConfigurationError, match=r"refused the connection: .*nobody") as e:
        PostgresSink(pg.jdbc_url, "not_made_yet", user="nobody").check_before_run()
    assert e.value.parameter == "jdbc_url"
    assert _staging_tables(spark, pg) == []

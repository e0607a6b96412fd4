"""The typed metrics line: counters per batch on every path, the log's JSON field names kept."""

from __future__ import annotations

import json
from typing import Any

from lowwater.core.time import MIN_TIMESTAMP
from lowwater.metrics.line import (
    GENERAL_RUNNING_TOTALS,
    NATIVE_RUNNING_TOTALS,
    MetricsLine,
    before_line,
    fold_lines,
    running_totals,
)

#: The fields of a metrics line as the log has held them (docs, the CLI and older logs use these names).
FIELDS = {"batch_id", "spark_batch_id", "processing_time_ms", "end_of_input", "path", "watermark_before",
          "combined_watermark", "partition_watermarks", "idle_partitions", "rows_in", "rows_late",
          "rows_late_by_partition", "rows_dead_lettered", "rows_windowed", "rows_unassigned", "direct",
          "operator_rows_in", "operator_rows_dead_lettered", "windows_fired", "open_windows", "open_window_starts",
          "state_rows", "state_bytes", "duration_ms"}


def _line(**kw: Any) -> MetricsLine:
    base: dict[str, Any] = {
        "batch_id": 3, "spark_batch_id": 3, "processing_time_ms": 1_700_000_015_000, "path": "native",
        "watermark_before": 6_999, "combined_watermark": 11_999, "partition_watermarks": {"0": 19_999, "1": 11_999},
        "idle_partitions": ("2",), "rows_in": 200, "rows_late": 5, "rows_late_by_partition": {"2": 5},
        "rows_windowed": 195, "windows_fired": 6, "open_window_starts": 2, "state_bytes": 10_000, "duration_ms": 720}
    return MetricsLine(**{**base, **kw})


def test_a_line_written_as_json_reads_back_equal() -> None:
    line = _line(dead_letter_reasons={"record does not parse": 2},
                 dead_letter_sample={"reason": "record does not parse: 'x'", "partition": 0, "offset": 7,
                                     "record": "x"})
    doc = json.loads(json.dumps(line.to_json()))
    assert MetricsLine.from_json(doc) == line
    assert MetricsLine.from_json(doc).to_json() == doc


def test_the_json_keeps_the_field_names_of_the_log_and_names_dead_letters_only_when_there_are_some() -> None:
    assert set(_line().to_json()) == FIELDS
    with_dead = _line(dead_letter_reasons={"missing key (user)": 1}, dead_letter_sample={"reason": "missing key"})
    assert set(with_dead.to_json()) == FIELDS | {"dead_letter_reasons", "dead_letter_sample"}


def test_the_keyed_paths_stage_a_is_named_on_its_lines_only() -> None:
    keyed = MetricsLine.of_batch(0, {"stage_a": "sql", "rows_in": 3}, {}, running=running_totals("keyed"),
                                 path="keyed")
    assert keyed.to_json()["stage_a"] == "sql"
    assert MetricsLine.from_json(json.loads(json.dumps(keyed.to_json()))) == keyed
    native = MetricsLine.of_batch(0, {"rows_in": 3}, {}, running=running_totals("native"), path="native")
    assert "stage_a" not in native.to_json()


def test_an_older_line_without_todays_fields_reads_with_their_defaults() -> None:
    old = {"batch_id": 4, "processing_time_ms": 20, "end_of_input": True, "combined_watermark": 2**63 - 1,
           "partition_watermarks": {"0": 2**63 - 1}, "idle_partitions": [], "rows_in": 0, "rows_late": 0,
           "rows_late_by_partition": {}, "windows_fired": 10, "open_windows": 0, "state_bytes": 0,
           "duration_ms": 5, "a_field_no_longer_written": 1}
    line = MetricsLine.from_json(old)
    assert (line.batch_id, line.end_of_input, line.windows_fired, line.open_windows) == (4, True, 10, 0)
    assert (line.direct, line.rows_unassigned, line.operator_rows_in, line.spark_batch_id) == (True, 0, 0, None)
    assert set(line.to_json()) == FIELDS


def test_running_totals_of_the_general_path_become_counts_for_the_batch() -> None:
    before = {"combined_watermark": 999, "rows_in": 4, "rows_late": 2, "rows_windowed": 2, "windows_fired": 1,
              "rows_late_by_partition": {"0": 2}, "operator_rows_in": 4}
    now = {"combined_watermark": 1_999, "rows_in": 5, "rows_late": 3, "rows_windowed": 6, "windows_fired": 1,
           "rows_late_by_partition": {"0": 2, "1": 1}, "operator_rows_in": 9, "state_rows": 7}
    line = MetricsLine.of_batch(1, now, before, running=running_totals("general"), path="general")
    assert (line.rows_in, line.rows_late, line.rows_windowed, line.windows_fired, line.operator_rows_in) == (5, 1, 4,
                                                                                                           0, 5)
    assert line.rows_late_by_partition == {"1": 1}, "partitions with no late row this batch are left out"
    assert (line.watermark_before, line.combined_watermark, line.state_rows) == (999, 1_999, 7)


def test_the_native_paths_count_per_batch_except_late_rows_by_partition() -> None:
    before = {"combined_watermark": 999, "rows_late": 2, "windows_fired": 4, "rows_late_by_partition": {"0": 2}}
    now = {"combined_watermark": 999, "rows_in": 3, "rows_late": 1, "windows_fired": 0,
           "rows_late_by_partition": {"0": 3}, "open_windows": None, "open_window_starts": 2}
    for path in ("native", "executor", "keyed"):
        line = MetricsLine.of_batch(1, now, before, running=running_totals(path), path=path)
        assert (line.rows_late, line.windows_fired, line.rows_late_by_partition) == (1, 0, {"0": 1})
        assert (line.open_windows, line.open_window_starts, line.path) == (None, 2, path)
    assert running_totals("reference") == GENERAL_RUNNING_TOTALS and running_totals("keyed") == NATIVE_RUNNING_TOTALS


def test_the_first_batch_was_judged_against_no_watermark_and_an_unknown_previous_batch_leaves_it_unknown() -> None:
    now = {"combined_watermark": 5, "rows_late": 1}
    assert MetricsLine.of_batch(0, now, {}, running=GENERAL_RUNNING_TOTALS, path=None).watermark_before == MIN_TIMESTAMP
    unknown = MetricsLine.of_batch(7, now, None, running=GENERAL_RUNNING_TOTALS, path=None)
    assert (unknown.watermark_before, unknown.rows_late) == (None, 1)


def test_a_batch_record_gives_spark_batch_id_and_clock_and_the_end_of_input_step_has_no_spark_batch() -> None:
    record = {"batch_id": 2, "clock_ms": 40, "end_of_input": False, "metrics": {"rows_in": 1}}
    line = MetricsLine.of_record(record, {}, running=NATIVE_RUNNING_TOTALS, path="native")
    assert (line.spark_batch_id, line.processing_time_ms, line.end_of_input) == (2, 40, False)
    end = MetricsLine.of_record({**record, "end_of_input": True}, {}, running=NATIVE_RUNNING_TOTALS, path="native")
    assert (end.spark_batch_id, end.end_of_input) == (None, True)
    moved = MetricsLine.of_record({**record, "spark_batch_id": 1}, {}, running=NATIVE_RUNNING_TOTALS, path="native")
    assert moved.spark_batch_id == 1


def test_a_dead_letter_comes_back_from_json_with_its_decimals_and_bytes() -> None:
    from decimal import Decimal

    from lowwater.metrics.dead_letters import letter_from_json, letter_json, record_json

    letter = {"reason": "missing key (user)", "partition": 0, "offset": 7,
              "record": {"user": None, "price": Decimal("1.50"), "zero": Decimal("0E-4"), "bin": b"\x01\xff",
                         "inf": Decimal("-Infinity"), "nested": [Decimal("2.5"), {"b": b""}], "text": "1.50"}}
    assert letter_from_json(letter_json(letter)) == letter
    # as Spark's to_json writes a struct: no null field, a Decimal a number with its places, bytes in base64
    assert record_json(letter["record"]) == (
        '{"price":1.50,"zero":0.0000,"bin":"Af8=","inf":"-Infinity","nested":[2.5,{"b":""}],"text":"1.50"}')
    assert json.loads(record_json(letter["record"]))["zero"] == 0


def _op(rows_in: int, windowed: int, late: int, fired: int, watermark: int | None = 1_999) -> dict[str, Any]:
    return {"operator_rows_in": rows_in, "rows_windowed": windowed, "rows_late": late, "rows_unassigned": 0,
            "operator_rows_dead_lettered": 0, "windows_fired": fired, "combined_watermark": watermark,
            "open_windows": 2, "state_rows": 4}


def test_each_window_operators_running_totals_become_its_counts_for_the_batch_and_fold_and_unfold() -> None:
    """With several window operators the line's own fields are the first one's; ``operators``
    holds each one's, so that a late row at the second one is counted somewhere."""
    before = {"combined_watermark": 999, "operators": {"w#2": _op(4, 4, 0, 1), "w#4": _op(1, 1, 0, 0)}}
    now = {"combined_watermark": 1_999, "operators": {"w#2": _op(6, 5, 1, 2), "w#4": _op(3, 2, 1, 1)}}
    line = MetricsLine.of_batch(1, now, before, running=running_totals("general"), path="general")
    assert line.operators == {"w#2": _op(2, 1, 1, 1), "w#4": _op(2, 1, 1, 1)}
    assert MetricsLine.from_json(json.loads(json.dumps(line.to_json()))) == line
    assert "operators" not in MetricsLine.of_batch(1, {"rows_in": 1}, {}, running=GENERAL_RUNNING_TOTALS,
                                                   path="general").to_json()
    first = MetricsLine.of_batch(0, before, {}, running=running_totals("general"), path="general")
    folded = fold_lines([first, line])
    assert folded.operators == {"w#2": _op(6, 5, 1, 2), "w#4": _op(3, 2, 1, 1)}, "counters summed, gauges the last's"
    # a batch record's fold through a batch, less that batch's line: the batches before it
    earlier = before_line(folded, line)
    assert earlier is not None
    assert earlier.operators == {"w#2": _op(4, 4, 0, 1, None) | {"open_windows": None, "state_rows": None},
                                 "w#4": _op(1, 1, 0, 0, None) | {"open_windows": None, "state_rows": None}}

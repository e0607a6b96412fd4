"""``lowwater scenario run FILE --runtime reference`` prints the output JSON; a malformed
scenario exits non-zero with a message that names the field (SCENARIOS.md, "The runner")."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lowwater.cli import main

BASE: dict[str, Any] = {
    "description": "two windows, one late element",
    "partitions": 1,
    "events": [
        {"key": "a", "ts": 1_000, "value": 1},
        {"key": "a", "ts": 12_000, "value": 2},
        {"key": "a", "ts": 3_000, "value": 4},
    ],
    "watermark": {"kind": "bounded_out_of_orderness", "max_out_of_orderness_ms": 1_000},
    "window": {"kind": "tumbling", "size_ms": 10_000, "offset_ms": 0},
    "allowed_lateness_ms": 0,
    "aggregate": "sum",
}


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "scenario.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_scenario_run_prints_the_output_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["scenario", "run", _write(tmp_path, BASE), "--runtime", "reference"])
    captured = capsys.readouterr()
    assert code == 0
    doc = json.loads(captured.out)
    assert sorted((r["window_start"], r["value"], r["fire_index"]) for r in doc["results"]) == [
        (0, 1, 0),
        (10_000, 2, 0),
    ]
    # 3000 arrives after watermark 12000 - 1000 - 1 = 10999 passed [0, 10000)
    assert [(e["ts"], e["value"], e["partition"]) for e in doc["late"]] == [(3_000, 4, 0)]
    assert [w["watermark"] for w in doc["watermarks"]] == [-1, 10_999, 2**63 - 1]


def test_reference_is_the_default_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, BASE)
    assert main(["scenario", "run", path]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["scenario", "run", path, "--runtime", "reference"]) == 0
    assert json.loads(capsys.readouterr().out) == default


def _drop(*path: Any) -> Callable[[dict[str, Any]], None]:
    def f(d: dict[str, Any]) -> None:
        for p in path[:-1]:
            d = d[p]
        del d[path[-1]]

    return f


def _set(value: Any, *path: Any) -> Callable[[dict[str, Any]], None]:
    def f(d: dict[str, Any]) -> None:
        for p in path[:-1]:
            d = d[p]
        d[path[-1]] = value

    return f


MALFORMED: list[tuple[str, Callable[[dict[str, Any]], None], list[str]]] = [
    ("missing window", _drop("window"), ["window", "required"]),
    ("missing events", _drop("events"), ["events"]),
    ("missing aggregate", _drop("aggregate"), ["aggregate"]),
    ("string timestamp", _set("1000", "events", 0, "ts"), ["events[0].ts", "int"]),
    ("float timestamp", _set(1000.5, "events", 0, "ts"), ["events[0].ts"]),
    ("bool timestamp", _set(True, "events", 1, "ts"), ["events[1].ts"]),
    ("missing key", _drop("events", 2, "key"), ["events[2].key"]),
    ("unknown aggregate", _set("median", "aggregate"), ["aggregate", "median"]),
    ("unknown watermark kind", _set("magic", "watermark", "kind"), ["watermark.kind", "magic"]),
    (
        "missing bound",
        _drop("watermark", "max_out_of_orderness_ms"),
        ["watermark.max_out_of_orderness_ms"],
    ),
    (
        "negative bound",
        _set(-1, "watermark", "max_out_of_orderness_ms"),
        ["watermark.max_out_of_orderness"],
    ),
    ("zero window size", _set({"kind": "tumbling", "size_ms": 0}, "window"), ["window.size"]),
    (
        "slide larger than size",
        _set({"kind": "sliding", "size_ms": 10, "slide_ms": 20}, "window"),
        ["window.slide"],
    ),
    ("zero session gap", _set({"kind": "session", "gap_ms": 0}, "window"), ["window.gap"]),
    ("negative session gap", _set({"kind": "session", "gap_ms": -5}, "window"), ["window.gap"]),
    ("unknown window kind", _set({"kind": "hopping", "size_ms": 10}, "window"), ["window.kind"]),
    ("negative lateness", _set(-1, "allowed_lateness_ms"), ["allowed_lateness_ms"]),
    ("partition out of range", _set(3, "events", 0, "partition"), ["partition"]),
    (
        "processing times without batches",
        _set([1, 2, 3], "processing_time_ms"),
        ["processing_time_ms"],
    ),
    (
        "unknown violation handler",
        _set({"kind": "legacy_ascending", "violation_handler": "panic"}, "watermark"),
        ["violation_handler"],
    ),
]


@pytest.mark.parametrize(
    ("mutate", "words"), [(m, w) for _, m, w in MALFORMED], ids=[n for n, _, _ in MALFORMED]
)
def test_a_malformed_scenario_exits_non_zero_naming_the_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    mutate: Callable[[dict[str, Any]], None],
    words: list[str],
) -> None:
    doc = copy.deepcopy(BASE)
    mutate(doc)
    code = main(["scenario", "run", _write(tmp_path, doc), "--runtime", "reference"])
    err = capsys.readouterr().err
    assert code != 0
    for word in words:
        assert word in err
    assert "Traceback" not in err


def test_a_file_that_is_not_json_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    assert main(["scenario", "run", str(path)]) != 0
    assert "JSON" in capsys.readouterr().err


def test_a_missing_file_exits_non_zero_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.json")
    assert main(["scenario", "run", missing]) != 0
    assert "nope.json" in capsys.readouterr().err


def test_an_unknown_runtime_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        main(["scenario", "run", _write(tmp_path, BASE), "--runtime", "flink"])
    assert e.value.code != 0


def test_a_failed_job_prints_what_it_emitted_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = copy.deepcopy(BASE)
    doc["watermark"] = {"kind": "legacy_ascending", "violation_handler": "fail"}
    code = main(["scenario", "run", _write(tmp_path, doc)])
    captured = capsys.readouterr()
    assert code != 0
    out = json.loads(captured.out)
    assert out["error"]["type"] == "MonotonyViolationError"
    assert "3000" in captured.err and "12000" in captured.err


def test_a_configuration_error_is_printed_whole_and_a_checkpoint_refusal_gets_no_build_hint(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A refused checkpoint names every change, and its message ends with what to do; the CLI cut every
    message at 400 characters (``... or --checkpoin; hint: check checkpoint_location in build()``),
    losing the window's change and the way out, and pointed at ``build()``, which has no checkpoint."""
    from lowwater.cli import _error
    from lowwater.core.errors import ConfigurationError

    changes = "; ".join(f"was 'WindowTransformation | {i}', now 'WindowTransformation | {i + 1}'" for i in range(12))
    message = f"ck belongs to a different pipeline ({changes}). Use a new checkpoint location, or run the pipeline " \
              "that made this one"
    assert _error(ConfigurationError("checkpoint_location", message), "run", verbose=False) == 2
    err = capsys.readouterr().err
    assert len(err) > 400 and err.rstrip().endswith("or run the pipeline that made this one") and "build()" not in err
    assert _error(ConfigurationError("fields", "no field 'x'"), "run", verbose=False) == 2
    assert capsys.readouterr().err.rstrip().endswith("hint: check fields in build()")


def test_verbose_is_taken_after_the_command_too() -> None:
    """The one-line error's hint says "--verbose shows the traceback"; given after the command
    (``lowwater run p.py --verbose``) it was an unrecognized argument."""
    from lowwater.cli import _parser

    for argv, verbose in [(["status", "ck"], False), (["--verbose", "status", "ck"], True),
                          (["status", "ck", "--verbose"], True), (["run", "p.py", "-v"], True),
                          (["plot", "ck", "-o", "w.png", "--verbose"], True), (["demo", "--verbose"], True)]:
        assert _parser().parse_args(argv).verbose is verbose, argv


def test_a_runs_closing_totals_stay_small_however_many_batches_it_runs() -> None:
    """``lowwater run`` kept every batch's metrics line for its closing lines: a weeks-long run's
    driver grew by each batch's line. It folds them into one as they come (``fold_lines``)."""
    from lowwater.metrics.line import FOLDED_REASONS, MetricsLine, fold_lines
    from lowwater.observe.progress import dead_letter_summary

    run: list[MetricsLine] = []
    for b in range(5_000):
        line = {"batch_id": b, "rows_dead_lettered": 2,
                "dead_letter_reasons": {"missing field (user)": 1, f"record does not parse: 'x{b}'": 1}}
        run[:] = [fold_lines([*run, MetricsLine.from_json(line)])]
    (total,) = run
    assert (total.folded_from, total.batch_id, total.folded_batches) == (0, 4_999, 5_000)
    assert total.rows_dead_lettered == 10_000
    assert len(total.dead_letter_reasons) <= FOLDED_REASONS
    assert total.dead_letter_reasons["missing field (user)"] == 5_000
    summary = dead_letter_summary([total.to_json()], True)
    assert summary is not None and summary.startswith("10000 records dead-lettered (missing field (user) x5000")


def test_py4j_s_own_root_logger_records_are_kept_out_of_a_run_unless_verbose(tmp_path: Path) -> None:
    """py4j logs a call into a JVM that has ended on the root logger, with its traceback: a run whose
    JVM a SIGTERM to the process group ended printed it under its one-line stop (session 54)."""
    import logging
    import os

    from lowwater.cli import _not_py4j

    py4j_record = logging.LogRecord("root", logging.ERROR, f"{os.sep}venv{os.sep}py4j{os.sep}java_gateway.py", 1056,
                                    "Exception while sending command.", None, None)
    assert not _not_py4j(py4j_record)
    assert _not_py4j(logging.LogRecord("root", logging.ERROR, "/app/job.py", 1, "mine", None, None))
    assert main(["status", str(tmp_path / "none")]) == 2
    assert _not_py4j not in logging.getLogger().filters  # main puts the root logger back as found

"""The metrics log, ``lowwater status``, ``lowwater plot`` and ``lowwater run --runtime reference``,
without Spark: checkpoints here are written by the engine's own writers (``StateStore`` for the
batch records, ``MetricsLine`` and ``MetricsLog`` for the metrics log), with the raw metrics each path reports."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lowwater.cli import main
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.metrics.log import through
from lowwater.observe import plot_watermarks
from lowwater.observe.accounting import from_lines
from lowwater.observe.metrics import MetricsLine, MetricsLog, lines_from_records, read_checkpoint, running_totals
from lowwater.observe.plot import COMBINED_LABEL
from lowwater.observe.progress import PROGRESS_HEADER, MetricsTail, progress_line
from lowwater.spark.state import StateStore

T0 = 1_700_000_000_000


def _native_raw(combined: int, parts: dict[str, int], idle: list[str], rows_in: int, late: int,
                late_cum: dict[str, int], fired: int, open_windows: int) -> dict[str, Any]:
    """Raw metrics as the native path reports them (counts per batch, late by partition as a running total)."""
    return {"combined_watermark": combined, "partition_watermarks": parts, "idle_partitions": idle,
            "rows_in": rows_in, "rows_windowed": rows_in - late, "rows_late": late, "rows_dead_lettered": 0,
            "rows_late_by_partition": late_cum,
            "windows_fired": fired, "open_windows": open_windows, "duration_ms": 700 + rows_in // 10,
            "state_bytes": 1000 * open_windows}


#: batch id -> (raw metrics); partition 1 lags, partition 2 goes idle at batch 3
NATIVE = [
    _native_raw(T0 - 1, {"0": T0 + 4_999, "1": T0 - 1, "2": T0 + 3_999}, [], 300, 0, {}, 0, 12),
    _native_raw(T0 + 1_999, {"0": T0 + 9_999, "1": T0 + 1_999, "2": T0 + 8_999}, [], 300, 2, {"0": 2}, 3, 15),
    _native_raw(T0 + 6_999, {"0": T0 + 14_999, "1": T0 + 6_999, "2": T0 + 8_999}, [], 200, 1, {"0": 2, "1": 1}, 4,
                13),
    _native_raw(T0 + 11_999, {"0": T0 + 19_999, "1": T0 + 11_999, "2": T0 + 8_999}, ["2"], 200, 5,
                {"0": 2, "1": 1, "2": 5}, 6, 10),
]
END = _native_raw(MAX_TIMESTAMP, {"0": MAX_TIMESTAMP, "1": MAX_TIMESTAMP, "2": MAX_TIMESTAMP}, [], 0, 0,
                  {"0": 2, "1": 1, "2": 5}, 10, 0)


def _write_batch(store: StateStore, batch_id: int, metrics: dict[str, Any], path: str = "native",
                 end: bool = False) -> MetricsLine:
    """What the engine's batch driver does per batch: the record (clock first), then the processor's
    raw metrics made a line against what it reported after the previous batch (which its state holds),
    kept in the record and appended to the log."""
    record = {"batch_id": batch_id, "clock_ms": T0 + 5_000 * batch_id, "end_of_input": end}
    store.write_batch_record(batch_id, record)
    previous = store.batch_record(batch_id - 1)
    before = previous["metrics"] if previous is not None else {}
    record = {**record, "metrics": metrics}
    line = MetricsLine.of_record(record, before, running=running_totals(path), path=path)
    through_before = (previous or {}).get("through")
    store.write_batch_record(batch_id, {**record, "line": line.to_json(),
                                        "through": through(line, through_before).to_json()})
    MetricsLog(store.root.parent).append(line)
    return line


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """Four micro-batches, a replay of batch 2 (after a crash), then the end of input."""
    ck = tmp_path / "ck"
    store = StateStore(ck)
    for i, m in enumerate(NATIVE[:3]):
        _write_batch(store, i, m)
    _write_batch(store, 2, {**NATIVE[2], "duration_ms": 999})  # Spark replays batch 2
    _write_batch(store, 3, NATIVE[3])
    _write_batch(store, 4, END, end=True)
    return ck


# -- the metrics log -------------------------------------------------------------------------
def test_every_batch_appends_one_line_and_readers_keep_a_replays_last_line(checkpoint: Path) -> None:
    mlog = MetricsLog(checkpoint)
    assert [x["batch_id"] for x in mlog.raw_lines()] == [0, 1, 2, 2, 3, 4]
    lines = read_checkpoint(checkpoint)
    assert [x["batch_id"] for x in lines] == [0, 1, 2, 3, 4]
    assert lines[2]["duration_ms"] == 999
    mlog.compact()
    assert [x["batch_id"] for x in mlog.raw_lines()] == [0, 1, 2, 3, 4]
    assert read_checkpoint(checkpoint) == lines


def test_a_line_holds_the_batchs_watermarks_idleness_counts_and_state(checkpoint: Path) -> None:
    line = read_checkpoint(checkpoint)[3]
    assert line == {
        "batch_id": 3, "spark_batch_id": 3, "processing_time_ms": T0 + 15_000, "end_of_input": False, "path": "native",
        "watermark_before": T0 + 6_999, "combined_watermark": T0 + 11_999,
        "partition_watermarks": {"0": T0 + 19_999, "1": T0 + 11_999, "2": T0 + 8_999},
        "idle_partitions": ["2"], "rows_in": 200, "rows_late": 5, "rows_late_by_partition": {"2": 5},
        "rows_dead_lettered": 0, "rows_windowed": 195, "rows_unassigned": 0, "direct": True, "operator_rows_in": 0,
        "operator_rows_dead_lettered": 0, "windows_fired": 6, "open_windows": 10, "open_window_starts": None,
        "state_rows": 10,
        "state_bytes": 10_000, "duration_ms": 720,
    }
    accounting = from_lines(read_checkpoint(checkpoint)).check()
    assert str(accounting) == "1000 rows in = 992 windowed + 8 late + 0 dead-lettered"


@pytest.mark.parametrize("path", ["general", "native", "executor"])
def test_counters_are_per_batch_whichever_way_the_path_keeps_them(tmp_path: Path, path: str) -> None:
    """The general path keeps running totals; the native paths count per batch (late rows by
    partition excepted); every line counts this batch alone."""
    store = StateStore(tmp_path / "ck")
    base = {"combined_watermark": 5, "partition_watermarks": {"0": 5}, "idle_partitions": [], "open_windows": 1}
    general = path == "general"
    _write_batch(store, 0, {**base, "rows_in": 3, "rows_late": 1, "rows_late_by_partition": {"0": 1},
                            "rows_windowed": 2, "windows_fired": 2, "state_rows": 4}, path=path)
    _write_batch(store, 1, {**base, "rows_in": 5, "rows_late": 4 if general else 3, "rows_late_by_partition": {"0": 4},
                            "rows_windowed": 4 if general else 2, "windows_fired": 2 if general else 0,
                            "state_rows": 6}, path=path)
    lines = read_checkpoint(tmp_path / "ck")
    assert [(x["rows_in"], x["rows_late"], x["rows_late_by_partition"], x["windows_fired"], x["state_rows"])
            for x in lines] == [(3, 1, {"0": 1}, 2, 4), (5, 3, {"0": 3}, 0, 6)]
    assert from_lines(lines).balanced, from_lines(lines)
    assert [x["path"] for x in lines] == [path, path]


def test_a_line_torn_by_a_crash_is_skipped_and_the_next_append_starts_a_fresh_line(checkpoint: Path) -> None:
    mlog = MetricsLog(checkpoint)
    with open(mlog.path, "a") as f:
        f.write('{"batch_id": 5, "combined_wat')
    mlog.append(MetricsLine(batch_id=5, combined_watermark=1))
    assert [x["batch_id"] for x in mlog.read()] == [0, 1, 2, 3, 4, 5]


def test_a_checkpoint_without_a_metrics_log_is_read_from_the_lines_its_batch_records_hold(checkpoint: Path) -> None:
    lines = read_checkpoint(checkpoint)
    MetricsLog(checkpoint).path.unlink()
    assert read_checkpoint(checkpoint) == lines


@pytest.mark.parametrize("path", ["general", "native"])
def test_batch_records_older_than_their_lines_are_read_by_the_path_the_checkpoint_records(
    tmp_path: Path, path: str
) -> None:
    """Records written before they held a line carry the raw metrics only: the path that wrote them
    (``pipeline.json``) says which counters are running totals, not the keys the metrics happen to have."""
    store = StateStore(tmp_path / "ck")
    store.claim({"path": path})
    general = path == "general"
    raw = [{"combined_watermark": 5, "rows_in": 3, "rows_late": 1, "rows_late_by_partition": {"0": 1},
            "rows_windowed": 2, "windows_fired": 2},
           {"combined_watermark": 9, "rows_in": 5, "rows_late": 4 if general else 3, "rows_late_by_partition": {"0": 4},
            "rows_windowed": 4 if general else 2, "windows_fired": 2 if general else 0}]
    for i, m in enumerate(raw):
        store.write_batch_record(i, {"batch_id": i, "clock_ms": T0 + i, "end_of_input": False, "metrics": m})
    lines = read_checkpoint(tmp_path / "ck")
    assert [(x["rows_in"], x["rows_late"], x["rows_late_by_partition"], x["windows_fired"], x["watermark_before"])
            for x in lines] == [(3, 1, {"0": 1}, 2, MIN_TIMESTAMP), (5, 3, {"0": 3}, 0, 5)]
    assert [x["path"] for x in lines] == [path, path]
    assert lines == lines_from_records(store.batch_records(), path)


def test_the_tail_calls_back_once_per_line_appended_after_it_started(checkpoint: Path) -> None:
    seen: list[int] = []
    with MetricsTail(checkpoint, lambda x: seen.append(x["batch_id"]), interval_s=0.01):
        MetricsLog(checkpoint).append(MetricsLine(batch_id=5))
        MetricsLog(checkpoint).append(MetricsLine(batch_id=6))
    assert seen == [5, 6]


def test_a_progress_line_shows_watermark_lag_idle_late_fired_and_duration(checkpoint: Path) -> None:
    line = progress_line(read_checkpoint(checkpoint)[3])
    assert line.split() == ["3", "2023-11-14", "22:13:31.999", "UTC", "3.0", "s", "2", "200", "5", "0", "6", "720",
                            "ms"]
    assert PROGRESS_HEADER.split()[:3] == ["batch", "combined", "watermark"]


# -- lowwater status -------------------------------------------------------------------------
def test_status_shows_watermarks_idle_flags_state_and_the_last_batches(
    checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", str(checkpoint), "--batches", "2"]) == 0
    out = capsys.readouterr().out
    assert f"checkpoint {checkpoint} (native path)" in out
    assert "5 batches (0..4), end of input reached" in out
    assert "totals: 1000 rows in, 8 late, 0 dead-lettered, 23 window firings" in out
    assert "accounting: 1000 rows in = 992 windowed + 8 late + 0 dead-lettered (balanced)" in out
    assert "watermarks after batch 3 (processing time 2023-11-14 22:13:35 UTC)" in out
    table = {row.split()[0]: row.split() for row in out.splitlines() if row.startswith("  ") and row.split()}
    assert table["0"][1:] == ["2023-11-14", "22:13:39.999", "UTC", "active", "2"]
    assert table["1"][1:] == ["2023-11-14", "22:13:31.999", "UTC", "active", "1"]
    assert table["2"][1:] == ["2023-11-14", "22:13:28.999", "UTC", "idle", "5"]
    assert table["combined"][1:4] == ["2023-11-14", "22:13:31.999", "UTC"]
    # one source: Flink's multiplexer, whose returning partition holds the minimum at once
    assert table["combined"][4:] == ["min", "over", "active", "partitions", "8"], table["combined"]
    assert "behind processing time" in out and "3.0 s" in out
    assert "state after batch 4: 0 open windows, 0 state rows, 0 B on disk" in out
    assert "last 2 of 5 batches:" in out
    assert table["3"] == ["3", "2023-11-14", "22:13:35", "UTC", "2023-11-14", "22:13:31.999", "UTC", "3.0", "s", "2",
                          "200", "5", "6", "720", "ms"]
    assert any(r.split()[:2] == ["4", "(end)"] and "MAX" in r for r in out.splitlines())


def test_status_says_the_valves_rule_for_the_combined_watermark_only_between_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Partitions of several sources are labelled ``source:partition``; between sources a source back
    from idle counts once it has caught up (Flink's valve). Every job's row said so, where a single
    source's partition back from idle holds the minimum at once."""
    store = StateStore(tmp_path / "ck")
    _write_batch(store, 0, _native_raw(T0, {"A:0": T0, "B:0": T0 + 5}, [], 10, 0, {}, 0, 1))
    assert main(["status", str(tmp_path / "ck")]) == 0
    combined = next(r for r in capsys.readouterr().out.splitlines() if r.split()[:1] == ["combined"])
    assert "min over active partitions; a source back from idle counts once caught up" in combined, combined


@pytest.mark.parametrize(("path", "flag"), [("keyed", {"rows_processed": 10}), ("general", {"rows_processed": 10})])
def test_status_and_plot_of_a_process_function_say_timers_and_processed_not_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, flag: dict[str, Any],
) -> None:
    """A job whose keyed operator is a process function has no window: status said "363 window
    firings" of its timers and "windowed" of the elements it processed."""
    store = StateStore(tmp_path / "ck")
    metrics = {**_native_raw(T0, {"0": T0}, [], 10, 0, {}, 3, 0), **flag}
    _write_batch(store, 0, metrics, path=path)
    assert main(["status", str(tmp_path / "ck")]) == 0
    out = capsys.readouterr().out
    assert "3 timers fired" in out and "window firings" not in out, out
    assert "accounting: 10 rows in = 10 processed + 0 late + 0 dead-lettered (balanced)" in out, out
    assert main(["plot", str(tmp_path / "ck"), "-o", str(tmp_path / "w.svg")]) == 0
    assert capsys.readouterr().out.rstrip().endswith("3 timers fired")


PROCESS = """
from lowwater.api import CollectionSource, KeyedProcessFunction
from lowwater.core.watermarks import WatermarkStrategy


class Remind(KeyedProcessFunction):
    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(value["ts"] + 1000)
        yield value

    def on_timer(self, timestamp, ctx):
        yield {"t": timestamp}


def build(env):
    source = CollectionSource([[{"k": "a", "ts": 1000}], [{"k": "a", "ts": 5000}], [{"k": "a", "ts": 9000}]],
                              processing_times_ms=[100000, 105000, 110000])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner("ts")
    env.from_source(source, strategy).key_by("k").process(Remind()).collect()
"""


def test_a_process_functions_timers_are_counted_on_the_reference_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its line's ``windows_fired`` counts its timers (as the keyed path's do): the reference
    runtime and the general path reported none, and status said "0 timers fired"."""
    ck = tmp_path / "ck"
    assert main(["run", _pipeline(tmp_path, PROCESS), "--runtime", "reference", "--checkpoint", str(ck)]) == 0
    capsys.readouterr()
    # the timers at 2000, 6000 and 10000 fire at the watermarks 4999, 8999 and the end of input's
    assert [x["windows_fired"] for x in read_checkpoint(ck)] == [0, 1, 1, 1]
    assert main(["status", str(ck)]) == 0
    assert "totals: 3 rows in, 0 late, 0 dead-lettered, 3 timers fired" in capsys.readouterr().out


def test_status_as_json_has_the_summary_and_the_last_lines(
    checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", str(checkpoint), "--json", "-n", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [b["batch_id"] for b in doc["batches"]] == [2, 3, 4]
    assert doc["summary"]["rows_late_by_partition"] == {"0": 2, "1": 1, "2": 5}
    assert doc["summary"]["current"]["idle_partitions"] == ["2"]
    assert doc["summary"]["accounting"] == {"rows_in": 1000, "rows_windowed": 992, "rows_late": 8,
                                            "rows_dead_lettered": 0, "rows_unassigned": 0, "scope": "job",
                                            "processed": False, "missing_batches": [], "balanced": True}


def test_status_says_the_end_of_input_was_reached_after_a_later_run_of_the_same_checkpoint(
    checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The end of input is final for a checkpoint: a later run's batch comes after its step (and finds
    every element late). Status read the flag from the last line alone, and said "not reached"."""
    assert main(["status", str(checkpoint), "--json"]) == 0
    fired = json.loads(capsys.readouterr().out)["summary"]["final_windows_fired"]
    _write_batch(StateStore(checkpoint), 5, {**END, "rows_in": 3, "rows_late": 3, "windows_fired": 0})
    assert main(["status", str(checkpoint), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert (summary["end_of_input"], summary["last_batch"], summary["final_windows_fired"]) == (True, 5, fired)


def test_status_of_a_checkpoint_with_no_batch_yet_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    StateStore(tmp_path / "ck")
    assert main(["status", str(tmp_path / "ck")]) == 0
    assert "no batches yet" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["status", "plot"])
@pytest.mark.parametrize(("make", "words"), [
    (lambda p: p / "missing", ["no such directory", "hint:"]),
    (lambda p: p, ["is not a lowwater checkpoint", "hint:"]),
    (lambda p: (p / "file.txt").write_text("x") and p / "file.txt", ["is a file", "hint:"]),
], ids=["missing", "not-a-checkpoint", "a-file"])
def test_status_and_plot_of_something_not_a_checkpoint_fail_in_one_line_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, make: Any, words: list[str]
) -> None:
    target = make(tmp_path)
    argv = [command, str(target)] + (["-o", str(tmp_path / "w.png")] if command == "plot" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lowwater: error: ")
    assert all(w in err for w in words) and "Traceback" not in err


def test_status_of_the_lowwater_subdirectory_suggests_the_checkpoint(
    checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", str(checkpoint / "lowwater")]) == 2
    assert f"did you mean {checkpoint}?" in capsys.readouterr().err


# -- lowwater plot ---------------------------------------------------------------------------
def test_the_plot_is_a_png_whose_drawn_series_equal_the_metrics_log(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "w.png"
    assert main(["plot", str(checkpoint), "-o", str(out)]) == 0
    assert (f"wrote {out}: 4 batches and the end of input, 3 partitions, 8 late rows, 23 window firings"
            in capsys.readouterr().out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000

    lines = read_checkpoint(checkpoint)
    data = plot_watermarks(lines, tmp_path / "again.png")
    run = [x for x in lines if not x["end_of_input"]]
    origin = data["origin_ms"]
    xs = [(x["processing_time_ms"] - T0) / 1000 for x in run]
    assert xs == data["x"] == [0.0, 5.0, 10.0, 15.0]

    def y(ms: int) -> float:
        return float("nan") if ms in (MIN_TIMESTAMP, MAX_TIMESTAMP) else (ms - origin) / 1000

    def same(points: list[tuple[float, float]], expected: list[float]) -> bool:
        return [p[0] for p in points] == xs and all(
            (a != a and b != b) or a == b for (_, a), b in zip(points, expected, strict=True))

    drawn = data["drawn"]
    for p in ("0", "1", "2"):
        assert same(drawn[f"partition {p}"], [y(x["partition_watermarks"][p]) for x in run])
    assert same(drawn[COMBINED_LABEL], [y(x["combined_watermark"]) for x in run])
    late = drawn["late elements (count), at the watermark they were judged against"]
    assert late == [(xs[i], y(run[i]["watermark_before"])) for i in range(len(run)) if run[i]["rows_late"]]
    assert [n for _, _, n in data["late"]] == [2, 1, 5]
    assert data["fired"] == [(5.0, 3), (10.0, 4), (15.0, 6), (20.0, 10)]
    assert data["idle"]["2"] == [False, False, False, True]


def test_the_plot_draws_the_last_batches_of_a_long_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every batch of a stream's log (10,000 lines kept) was drawn: about a minute and 500 MB, each
    batch's bars, idle span and late label in a picture no one could read."""
    from lowwater.observe.plot import _runs

    ck, _ = _long_checkpoint(tmp_path, 30)
    out = tmp_path / "w.png"
    assert main(["plot", str(ck), "-o", str(out), "-n", "12"]) == 0
    assert f"wrote {out}: the last 12 batches, 3 partitions" in capsys.readouterr().out
    assert main(["plot", str(ck), "-o", str(out), "-n", "0"]) == 0
    assert f"wrote {out}: 30 batches, 3 partitions" in capsys.readouterr().out
    assert _runs([False, True, True, False, True]) == [(1, 3), (4, 5)] and _runs([]) == []


@pytest.mark.parametrize("suffix", [".svg", ".html"])
def test_the_plot_can_be_svg_or_a_web_page_with_the_svg_inline(checkpoint: Path, tmp_path: Path,
                                                                 suffix: str) -> None:
    out = tmp_path / f"w{suffix}"
    assert main(["plot", str(checkpoint), "-o", str(out)]) == 0
    text = out.read_text()
    assert "<svg" in text
    if suffix == ".html":
        assert text.startswith("<!doctype html>") and "<table>" in text and "MAX (end of input)" in text


def test_the_plot_accepts_the_batch_records_the_demo_passes(checkpoint: Path, tmp_path: Path) -> None:
    from_records = plot_watermarks(StateStore(checkpoint).batch_records(), tmp_path / "r.png")
    from_log = plot_watermarks(read_checkpoint(checkpoint), tmp_path / "l.png")
    assert from_records["x"] == from_log["x"] and from_records["late"] == from_log["late"]


def test_plot_errors_are_one_line_with_a_hint(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plot", str(checkpoint), "-o", str(tmp_path / "w.jpg")]) == 2
    assert ".png, .svg or .html" in capsys.readouterr().err
    assert main(["plot", str(checkpoint), "-o", str(tmp_path / "nodir" / "w.png")]) == 2
    assert "no directory" in capsys.readouterr().err
    StateStore(tmp_path / "empty")
    assert main(["plot", str(tmp_path / "empty"), "-o", str(tmp_path / "w.png")]) == 2
    assert "no finished micro-batch" in capsys.readouterr().err


# -- lowwater run ----------------------------------------------------------------------------
PIPELINE = """
from lowwater.api import CollectionSource
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows

RUNTIME_OPTIONS = {"trigger": "available_now"}  # a Spark option: ignored by the reference runtime


def build(env):
    source = CollectionSource(
        [[{"k": "a", "ts": 1000, "p": 0}, {"k": "a", "ts": 12000, "p": 1}],
         [{"k": "a", "ts": 14000, "p": 0}, {"k": "a", "ts": 25000, "p": 1}],
         [{"k": "a", "ts": 2000, "p": 0}, {"k": "a", "ts": 26000, "p": 1}]],
        partitions=2, partition_of="p", processing_times_ms=[100000, 105000, 110000])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(1000).with_timestamp_assigner(lambda e, _: e["ts"])
    env.from_source(source, strategy).key_by(lambda e: e["k"]).window(TumblingEventTimeWindows.of(10000)).count() \\
        .collect()
"""


def _pipeline(tmp_path: Path, text: str, name: str = "pipeline.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_run_on_the_reference_runtime_prints_a_line_per_batch_and_keeps_metrics_for_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ck = tmp_path / "ck"
    assert main(["run", _pipeline(tmp_path, PIPELINE), "--runtime", "reference", "--checkpoint", str(ck)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "lowwater run pipeline: reference runtime, 4 batches"
    assert out[1] == PROGRESS_HEADER
    rows = [r.split() for r in out[2:6]]
    # batch, watermark, lag, idle, rows in, late, dead, fired (the reference runtime does not time batches)
    assert rows == [
        ["0", "-1", "100.0", "s", "-", "2", "0", "0", "0", "-"],
        ["1", "12999", "92.0", "s", "-", "2", "0", "0", "1", "-"],  # fires [0, 10000)
        ["2", "12999", "97.0", "s", "-", "2", "1", "0", "0", "-"],  # ts 2000 is late
        ["3*", "MAX", "(end", "of", "input)", "-", "-", "0", "0", "0", "2", "-"],
    ]
    lines = read_checkpoint(ck)
    assert [x["batch_id"] for x in lines] == [0, 1, 2, 3]
    assert lines[2]["rows_late_by_partition"] == {"0": 1} and lines[2]["watermark_before"] == 12_999
    assert main(["status", str(ck)]) == 0
    assert "(reference path)" in capsys.readouterr().out


TWO_OPERATORS = """
from lowwater.api import CollectionSource
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import TumblingEventTimeWindows


def build(env):
    source = CollectionSource(
        [[{"k": "a", "ts": 1000, "p": 0}, {"k": "a", "ts": 12000, "p": 1}],
         [{"k": "a", "ts": 35000, "p": 0}, {"k": "a", "ts": 36000, "p": 1}],
         [{"k": "a", "ts": 2000, "p": 0}, {"k": "a", "p": 1}]],
        partitions=2, partition_of="p", processing_times_ms=[100000, 105000, 110000])
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(1000).with_timestamp_assigner("ts")
    tens = env.from_source(source, strategy).key_by("k").window(TumblingEventTimeWindows.of(10000)) \\
        .allowed_lateness(60000).count()
    tens.key_by("key").window(TumblingEventTimeWindows.of(30000)).sum("value").collect()
"""


def test_status_shows_every_window_operators_watermark_counts_and_accounting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job of two window operators: status showed the first one's counts alone, so the second
    one's late rows (here the first one's re-firing for ts 2000, late at the 30 s window that
    fired at 35000) were nowhere."""
    ck = tmp_path / "ck"
    assert main(["run", _pipeline(tmp_path, TWO_OPERATORS), "--runtime", "reference", "--checkpoint", str(ck)]) == 0
    assert ("2 operators (the lines above are the first one's): window aggregate#1: 0 late, 4 fired; "
            "window aggregate#2: 1 late, 2 fired") in capsys.readouterr().out.splitlines()
    assert main(["status", str(ck)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("operators (2; above, rows in and dead letters are the job's, the rest the first one's):")
    assert out[at + 1].split() == ["operator", "watermark", "rows", "in", "windowed", "late", "dead-lettered", "fired",
                                   "open", "windows", "accounting"]
    # the first: 5 elements (a 6th, without a timestamp, dead-lettered before it); its 10 s windows
    # [0, 10 s) (twice: the late-but-allowed ts 2000 fires it again), [10 s, 20 s), and [30 s, 40 s)
    # at the end of input. The second: those 4 results, the re-firing late for [0, 30 s), which
    # fired at the watermark 33999; [0, 30 s) and [30 s, 60 s) fire
    assert [x.split() for x in out[at + 2:at + 4]] == [
        ["window", "aggregate#1", "33999", "5", "5", "0", "0", "4", "0", "balanced"],
        ["window", "aggregate#2", "33999", "4", "3", "1", "0", "2", "0", "balanced"]]
    assert "accounting: 5 rows in = 5 windowed + 0 late + 0 dead-lettered (at the window operator) (balanced)" in out
    assert main(["status", str(ck), "--json"]) == 0
    ops = json.loads(capsys.readouterr().out)["summary"]["operators"]
    assert {name: (op["operator_rows_in"], op["rows_late"], op["windows_fired"], op["accounting"]["balanced"])
            for name, op in ops.items()} == {"window aggregate#1": (5, 0, 4, True),
                                             "window aggregate#2": (4, 1, 2, True)}
    # folded into one line, the log still counts each operator's every batch
    assert MetricsLog(ck).fold(keep=1)
    folded = read_checkpoint(ck)
    assert len(folded) == 2 and folded[0]["operators"]["window aggregate#2"]["rows_late"] == 1
    assert main(["status", str(ck)]) == 0
    assert [x.split() for x in capsys.readouterr().out.splitlines()[at + 2:at + 4]] == [
        ["window", "aggregate#1", "33999", "5", "5", "0", "0", "4", "0", "balanced"],
        ["window", "aggregate#2", "33999", "4", "3", "1", "0", "2", "0", "balanced"]]


def test_the_reference_runtime_refuses_a_uri_checkpoint_instead_of_making_a_local_directory_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It keeps its metrics log with local file calls: given ``hdfs://nn/ck`` it used to create
    ``./hdfs:/nn/ck/lowwater/metrics.jsonl`` and say nothing."""
    monkeypatch.chdir(tmp_path)
    code = main(["run", _pipeline(tmp_path, PIPELINE), "--runtime", "reference", "--checkpoint", "hdfs://nn:8020/ck"])
    assert code == 2
    err = capsys.readouterr().err
    assert "keeps its metrics log in a local directory, not at hdfs://nn:8020/ck" in err and "hint:" in err
    assert not (tmp_path / "hdfs:").exists()


def test_a_checkpoint_that_is_a_file_is_refused_by_name_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--checkpoint afile`` ran the whole job first, then failed with ``[Errno 20] Not a
    directory: 'afile/lowwater/metrics.jsonl'`` and a hint to rerun with ``--verbose``."""
    afile = tmp_path / "afile"
    afile.write_text("notes\n")
    code = main(["run", _pipeline(tmp_path, PIPELINE), "--runtime", "reference", "--checkpoint", str(afile)])
    assert code == 2
    captured = capsys.readouterr()
    assert f"--checkpoint {afile} is a file, not a directory" in captured.err and "hint:" in captured.err
    assert "Errno" not in captured.err and "lowwater run pipeline" not in captured.out  # refused before it ran
    assert afile.read_text() == "notes\n"


def test_the_state_store_refuses_a_checkpoint_location_that_is_a_file(tmp_path: Path) -> None:
    """The Spark paths' state: a file as the location failed in ``mkdir`` with ``[Errno 20]``."""
    from lowwater.core.errors import ConfigurationError
    from lowwater.spark.state import StateStore

    afile = tmp_path / "afile"
    afile.write_text("notes\n")
    with pytest.raises(ConfigurationError, match="is a file, not a directory; hint:"):
        StateStore(afile)
    StateStore(tmp_path / "new")  # a directory that is not there yet is made
    assert (tmp_path / "new" / "lowwater" / "batches").is_dir()


@pytest.mark.parametrize(("text", "words"), [
    ("x = 1\n", ["defines no build(env)", "hint:"]),
    ("def build(env):\n    raise ValueError('no input configured')\n", ["ValueError: no input configured", "hint:"]),
    ("import nonexistent_module_xyz\n", ["failed while loading", "ModuleNotFoundError", "hint:"]),
    ("def build(env):\n    pass\n", ["added no sink", "hint:"]),
    ("RUNTIME_OPTIONS = {'speed': 'fast'}\ndef build(env):\n    pass\n", ["unknown option(s) ['speed']", "hint:"]),
], ids=["no-build", "build-raises", "import-error", "no-sink", "unknown-option"])
def test_run_errors_are_one_line_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: list[str]
) -> None:
    assert main(["run", _pipeline(tmp_path, text), "--runtime", "reference"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert all(w in err for w in words), err


def test_run_of_a_missing_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.py")]) == 2
    assert "nope.py" in capsys.readouterr().err


def test_verbose_adds_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _pipeline(tmp_path, "def build(env):\n    raise ValueError('boom')\n")
    assert main(["--verbose", "run", path, "--runtime", "reference"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for command in ("run", "status", "plot", "scenario", "demo"):
        assert f"    {command} " in out


class _ClosedPipe:
    """A stdout whose reader went away (``lowwater status --json | head``)."""

    def write(self, _: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        pass


def test_status_refuses_a_negative_count_and_ends_quietly_when_its_reader_goes_away(
        checkpoint: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``-n -1`` was taken (every batch but the first); ``status --json | head`` ended with
    ``lowwater: error: [Errno 32] Broken pipe`` and exit code 2."""
    import sys

    with pytest.raises(SystemExit):
        main(["status", str(checkpoint), "-n", "-1"])
    assert "expected a whole number >= 0" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["status", str(checkpoint), "--json"]) == 0
    assert "Broken pipe" not in capsys.readouterr().err


def test_a_checkpoint_has_a_job_id_from_its_first_run_and_an_older_one_has_none(tmp_path: Path) -> None:
    """A DeltaSink's default app id is the job's: a new checkpoint, a new job."""
    from lowwater.spark.state import StateStore

    first = StateStore(tmp_path / "a").job_id()
    assert first is not None and StateStore(tmp_path / "a").job_id() == first  # kept across restarts
    assert StateStore(tmp_path / "b").job_id() not in (None, first)
    older = StateStore(tmp_path / "old")
    older.commit_json(0, {})  # a batch committed before checkpoints had job ids
    assert older.job_id() is None and StateStore(tmp_path / "old").job_id() is None


def test_status_shows_a_dead_letter_sample_without_a_record_as_its_reason_alone() -> None:
    """A record that did not parse has no fields: the sample line ended ``...: 'not json'": ``."""
    from lowwater.observe.status import render_status

    line = {"batch_id": 0, "processing_time_ms": 0, "combined_watermark": 5, "rows_in": 2, "rows_dead_lettered": 2,
            "dead_letter_reasons": {"record does not parse": 2},
            "dead_letter_sample": {"reason": "record does not parse: 'x'", "partition": 0, "offset": 3,
                                   "record": ""}}
    with_record = {**line, "batch_id": 1, "dead_letter_sample": {**line["dead_letter_sample"], "record": '{"a":1}'}}
    shown = [x for x in render_status("ck", [line]).splitlines() if "e.g." in x]
    assert shown == ["  e.g. partition 0 offset 3: record does not parse: 'x'"]
    shown = [x for x in render_status("ck", [with_record]).splitlines() if "e.g." in x]
    assert shown == ["  e.g. partition 0 offset 3: record does not parse: 'x': {\"a\":1}"]


def test_the_cli_names_what_is_wrong_with_a_path_it_is_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each was a raw Errno (IsADirectoryError, FileExistsError), a message naming the word "file"
    in place of the path, or "no such pipeline file" for a directory that exists."""
    from lowwater.cli import main

    (tmp_path / "afile").write_text("not json")
    (tmp_path / "adir").mkdir()
    cases = [
        (["scenario", "run", str(tmp_path / "adir")], f"{tmp_path / 'adir'}: is a directory; pass a scenario JSON"),
        (["scenario", "run", str(tmp_path / "afile")], f"{tmp_path / 'afile'}: is not valid JSON"),
        (["scenario", "run", str(tmp_path / "none.json")], f"{tmp_path / 'none.json'}: no such file"),
        (["run", str(tmp_path / "adir")], f"{tmp_path / 'adir'} is a directory, not a pipeline file"),
        (["demo", "--out", str(tmp_path / "afile")], f"--out {tmp_path / 'afile'} is a file"),
        (["demo", "--bootstrap-servers", "x:1"], "--bootstrap-servers: is for the Kafka demo: add --kafka"),
    ]
    for argv, said in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert said in err and "Errno" not in err, (argv, err)


def test_status_of_a_native_path_checkpoint_counts_its_open_window_starts() -> None:
    """The native path keeps window starts on the driver (its windows per key are files on the
    executors): status printed ``- open windows, - state rows`` where the line holds the count."""
    from lowwater.observe.status import render_status

    line = {"batch_id": 4, "processing_time_ms": 0, "combined_watermark": 5, "rows_in": 2, "path": "native",
            "open_windows": None, "open_window_starts": 10, "state_rows": None, "state_bytes": 2048}
    shown = [x for x in render_status("ck", [line]).splitlines() if x.startswith("state after")]
    assert shown == ["state after batch 4: 10 open window starts, 2.0 KiB on disk"]


# -- retention: the log folds its older lines -------------------------------------------------------
def _long_checkpoint(tmp_path: Path, batches: int) -> tuple[Path, StateStore]:
    ck = tmp_path / "long"
    store = StateStore(ck)
    for b in range(batches):
        raw = NATIVE[b % len(NATIVE)]
        late_cum = {p: n * (b + 1) for p, n in {"0": 1, "1": b % 2}.items()}  # a running total
        _write_batch(store, b, {**raw, "combined_watermark": T0 + 1_000 * b, "rows_late_by_partition": late_cum,
                                **({"rows_dead_lettered": 1, "dead_letter_reasons": {f"no ts x{b % 3}": 1}}
                                   if b % 5 == 0 else {})})
    return ck, store


def test_folding_keeps_the_newest_lines_and_every_batch_in_the_totals(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A stream's log grew by a line per batch for ever (12 MB a day at a 5-second trigger)."""
    from lowwater.observe.status import summarize

    ck, _ = _long_checkpoint(tmp_path, 30)
    before = read_checkpoint(ck)
    mlog = MetricsLog(ck)
    assert mlog.fold(keep=10)
    after = read_checkpoint(ck)
    assert len(list(mlog.raw_lines())) == 11
    assert after[1:] == before[20:], "the newest lines as they were"
    head = after[0]
    assert (head["folded_from"], head["batch_id"], head["folded_batches"]) == (0, 19, 20)
    assert head["watermark_before"] == before[0]["watermark_before"]
    assert head["combined_watermark"] == before[19]["combined_watermark"]
    for key in ("rows_in", "rows_late", "rows_windowed", "rows_dead_lettered", "windows_fired"):
        assert head[key] == sum(x[key] for x in before[:20]), key
    s, t = summarize(before), summarize(after)
    assert (t["batches"], t["first_batch"], t["last_batch"]) == (30, 0, 29)
    for key in ("rows_in", "rows_late", "rows_late_by_partition", "rows_dead_lettered", "windows_fired"):
        assert t[key] == s[key], key
    assert from_lines(after) == from_lines(before) and from_lines(after).missing_batches == ()
    # folding again folds the folded line with the next ones; nothing to fold is no rewrite
    assert mlog.fold(keep=5)
    again = read_checkpoint(ck)
    assert (again[0]["folded_from"], again[0]["batch_id"], again[0]["folded_batches"]) == (0, 24, 25)
    assert summarize(again)["rows_in"] == s["rows_in"]
    assert not mlog.fold(keep=5)
    assert main(["status", str(ck)]) == 0
    assert "30 batches (0..29)" in capsys.readouterr().out


def test_folding_keeps_the_end_of_input_and_a_gap_before_the_folded_lines(tmp_path: Path) -> None:
    ck, store = _long_checkpoint(tmp_path, 8)
    _write_batch(store, 8, END, end=True)
    for b in (9, 10, 12):  # a later run's batches; batch 11's line is missing
        _write_batch(store, b, NATIVE[0])
    mlog = MetricsLog(ck)
    assert mlog.fold(keep=2)
    lines = read_checkpoint(ck)
    assert [(x["batch_id"], x.get("folded_from"), x["end_of_input"]) for x in lines] == [
        (8, None, True), (9, 0, False), (10, None, False), (12, None, False)]
    assert from_lines(lines).missing_batches == (11,)


def test_a_follower_goes_on_after_the_log_is_folded(tmp_path: Path) -> None:
    """Live progress and the listener follow the file by its offset: a rewrite made it shorter."""
    ck, store = _long_checkpoint(tmp_path, 12)
    follower = MetricsLog(ck).follow()
    assert [x["batch_id"] for x in follower.poll()] == list(range(12))
    assert MetricsLog(ck).fold(keep=3)
    assert follower.poll() == []
    _write_batch(store, 12, NATIVE[1])
    assert [x["batch_id"] for x in follower.poll()] == [12]


def test_the_newest_batch_records_alone_still_count_every_batch(tmp_path: Path) -> None:
    """A checkpoint on a URI has no metrics.jsonl: status read the newest 1,000 batch records, and
    its totals were those batches' alone."""
    from lowwater.observe.status import summarize

    ck, store = _long_checkpoint(tmp_path, 30)
    _write_batch(store, 30, END, end=True)
    every = read_checkpoint(ck)
    for b in range(25):
        store.forget_batch_record(b)
    newest = lines_from_records(store.batch_records(), "native")
    head = newest[0]
    assert (head["folded_from"], head["batch_id"], head["folded_batches"]) == (0, 24, 25)
    assert head["combined_watermark"] == every[24]["combined_watermark"]
    assert newest[1:] == every[25:]
    s, t = summarize(every), summarize(newest)
    for key in ("batches", "first_batch", "last_batch", "end_of_input", "rows_in", "rows_late",
                "rows_late_by_partition", "rows_dead_lettered", "windows_fired"):
        assert t[key] == s[key], key
    assert from_lines(newest) == from_lines(every)

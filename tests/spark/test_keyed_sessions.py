"""Stage B of the keyed path in columns (``keyed_sessions``) equals the reference operator, key for
key, batch after batch (no Spark needed: the bucket function runs on Arrow tables here).

Random sessions with late elements, elements that fire a session at once (allowed lateness),
null values, several watermark steps per batch and keys that pass from one form of state to
the other: every batch's results, late output, dead letters and counters must be those of the
same batches run with every key through the reference operator, and so must the end.
"""

from __future__ import annotations

import json
import pickle
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lowwater.api import CollectSink, OutputTag, StreamExecutionEnvironment
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP
from lowwater.core.watermarks import WatermarkStrategy
from lowwater.core.windows import EventTimeSessionWindows
from lowwater.core.windows.events import WindowResult
from lowwater.spark.json_rows import document, shape, to_json
from lowwater.spark.keyed import KeyedPlan, _per_bucket, keyed_plan
from lowwater.spark.keyed_sessions import (
    MAGIC,
    ColumnarSessions,
    from_slice,
    result_value,
    results_json,
    results_shapes,
    rows_blob,
    rows_of,
    to_slice,
)
from lowwater.spark.sealed import CheckpointIntegrityError, StateKey
from lowwater.spark.sources import PartitionedLogSource

GAP = 3_000
KEY = StateKey(b"k" * 32, "the test")
FIELDS = ("key", "ts", "value")
LATE = OutputTag("late")


def _plan(tmp: Path, aggregate: str, lateness: int) -> KeyedPlan:
    env = StreamExecutionEnvironment()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(2_000).with_timestamp_assigner("ts")
    src = PartitionedLogSource(tmp, [("key", "STRING"), ("ts", "BIGINT"), ("value", "BIGINT")])
    windowed = (env.from_source(src, strategy).key_by("key").window(EventTimeSessionWindows.with_gap(GAP))
                .allowed_lateness(lateness).side_output_late_data(LATE))
    out = windowed.count() if aggregate == "count" else getattr(windowed, aggregate)("value")
    out.add_sink(CollectSink())
    out.get_side_output(LATE).add_sink(CollectSink())
    plan, why = keyed_plan(env)
    assert plan is not None, why
    return plan


def _elements(rows: list[tuple[Any, int, int | None]], seq0: int) -> pa.Table:
    kb = [None if k is None else f"s:{k}" if isinstance(k, str) else f"i:{k}" for k, _, _ in rows]
    n = len(rows)
    key_type = pa.int64() if rows and isinstance(rows[0][0], int) else pa.string()
    return pa.table({
        "_kb": pa.array(kb, pa.string()), "_source": pa.array([0] * n, pa.int32()),
        "_partition": pa.array([i % 3 for i in range(n)], pa.int32()),
        "_offset": pa.array(range(seq0, seq0 + n), pa.int64()), "_seq": pa.array(range(seq0, seq0 + n), pa.int64()),
        "_sub": pa.array([0] * n, pa.int32()), "_ts": pa.array([r[1] for r in rows], pa.int64()),
        "_f0": pa.array([r[0] for r in rows], key_type), "_f1": pa.array([r[1] for r in rows], pa.int64()),
        "_f2": pa.array([r[2] for r in rows], pa.int64()),
    })


def _states(stored: dict[str, tuple[Any, ...]]) -> pa.Table:
    rows = list(stored.items())
    return pa.table({
        "_kb": pa.array([k for k, _ in rows], pa.string()), "_v": pa.array([r[0] for _, r in rows], pa.int64()),
        "state": pa.array([r[1] for _, r in rows], pa.binary()),
        "next_event": pa.array([r[2] for _, r in rows], pa.int64()),
        "next_proc": pa.array([r[3] for _, r in rows], pa.int64()),
        "live": pa.array([r[4] for _, r in rows], pa.bool_()),
    })


def _batches(seed: int, int_keys: bool) -> list[tuple[list[tuple[Any, int, int | None]], list[int]]]:
    """Batches of (key, ts, value) with their watermark steps: 10 s of event time each, 2 s of
    disorder, some elements seconds late, some null values."""
    rnd = random.Random(seed)
    keys: list[Any] = list(range(-3, 5)) if int_keys else [f"k{i}" for i in range(8)]
    out = []
    w = MIN_TIMESTAMP
    top = 0
    for b in range(8):
        base = 1_000_000 + b * 10_000
        rows: list[tuple[Any, int, int | None]] = []
        for _ in range(rnd.randint(0, 40)):
            k = rnd.choice(keys)
            ts = base + rnd.randint(-2_000, 10_000)
            if rnd.random() < 0.1:
                ts -= rnd.randint(2_000, 9_000)
            elif w > MIN_TIMESTAMP and rnd.random() < 0.15:  # late, or in a session that fired (allowed lateness)
                ts = w - rnd.randint(0, 6_000)
            value = None if rnd.random() < 0.03 else rnd.randint(-(2**62), 2**62) if rnd.random() < 0.05 \
                else rnd.randint(-50, 100)
            rows.append((k, ts, value))
            top = max(top, ts)
        steps = sorted({top - 2_001 - rnd.randint(0, 3_000), top - 2_001})
        steps = [s for s in steps if s > w]
        if steps:
            w = steps[-1]
        out.append((rows, steps))
    out.append(([], [MAX_TIMESTAMP]))  # the end of input fires what is left
    return out


def _run(plan: KeyedPlan, batches: list[Any], columnar: Any) -> list[dict[str, Any]]:
    """Each batch's outputs, with the bucket function ``columnar`` (a bool, or a function of the
    batch number) says, state carried from batch to batch as the keyed path carries it."""
    stored: dict[str, tuple[Any, ...]] = {}
    w_prev = MIN_TIMESTAMP
    seq = 0
    seen = []
    for b, (rows, steps) in enumerate(batches, start=1):
        on = columnar(b) if callable(columnar) else columnar
        fn = _per_bucket(plan, KEY, w_prev, steps, 5_000_000, b, max([w_prev, *steps]), False, FIELDS, None,
                         columnar=on)
        table = fn(_elements(rows, seq), _states(stored))
        seq += len(rows)
        got: dict[str, Any] = {"results": Counter(), "late": Counter(), "dead": 0}
        for row in table.to_pylist():
            if row["kind"] == "result":
                r = result_value(row["blob"])
                got["results"][(r.key, r.window_start, r.window_end, r.value, r.fire_index)] += 1
                assert json.loads(row["json"])["value"] == r.value
            elif row["kind"] == "side:0":
                v = pickle.loads(row["blob"])
                got["late"][(v["key"], v["ts"], v["value"])] += 1
            elif row["kind"] == "dead":
                got["dead"] += 1
            elif row["kind"] == "state":
                stored[row["_kb"]] = (b, row["blob"], row["next_event"], row["next_proc"], row["live"])
            else:
                stats = json.loads(row["blob"])
                got["stats"] = {k: stats[k] for k in ("op_rows_in", "op_dead", "windowed", "late", "unassigned",
                                                      "fired")}
                got["columnar_keys"] = stats["columnar_keys"]
        seen.append(got)
        w_prev = max([w_prev, *steps])
    return seen


@pytest.mark.filterwarnings("error::FutureWarning")  # pyarrow's deprecations: the bucket function uses none
@pytest.mark.parametrize("aggregate", ["sum", "count", "min", "max"])
@pytest.mark.parametrize("lateness", [0, 2_500])
@pytest.mark.parametrize("int_keys", [False, True])
def test_columns_equal_the_reference_operator_batch_for_batch(tmp_path: Path, aggregate: str, lateness: int,
                                                               int_keys: bool) -> None:
    plan = _plan(tmp_path, aggregate, lateness)
    totals: Counter[str] = Counter()
    for seed in range(6):
        batches = _batches(seed, int_keys)
        reference = _run(plan, batches, False)
        columns = _run(plan, batches, True)
        mixed = _run(plan, batches, lambda b: b % 2 == 0)  # the state passes from one form to the other
        for b, (want, got, mix) in enumerate(zip(reference, columns, mixed, strict=True), start=1):
            for part in ("results", "late", "dead", "stats"):
                assert got[part] == want[part], (seed, b, part)
                assert mix[part] == want[part], (seed, b, part, "mixed")
        totals.update(results=sum(r["results"].total() for r in reference),
                      refires=sum(n for r in reference for k, n in r["results"].items() if k[4] > 0),
                      late=sum(r["late"].total() for r in reference), dead=sum(r["dead"] for r in reference),
                      columnar=sum(g["columnar_keys"] for g in columns),
                      reference_columnar=sum(g["columnar_keys"] for g in reference))
    assert totals["results"] > 100 and totals["late"] > 0 and totals["columnar"] > 100
    assert (totals["dead"] > 0) == (aggregate != "count")  # a null value: count takes it
    assert totals["reference_columnar"] == 0
    assert (totals["refires"] > 0) == (lateness > 0)


def test_a_wrapping_sum_and_the_extremes_in_columns(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "sum", 0)
    top = 2**63 - 1
    batches = [([("a", 1_000, top), ("a", 1_500, 1), ("b", 1_000, -(2**63)), ("b", 2_000, -1)], [500]),
               ([], [MAX_TIMESTAMP])]
    reference, columns = _run(plan, batches, False), _run(plan, batches, True)
    assert columns[1]["results"] == reference[1]["results"] == Counter(
        {("a", 1_000, 4_500, -(2**63), 0): 1, ("b", 1_000, 5_000, top, 0): 1})
    assert columns[0]["columnar_keys"] == 2


def test_the_two_forms_of_a_keys_state_convert_into_each_other() -> None:
    rows = [(1_000, 5_000, 7, 0), (9_000, 12_000, -3, 1)]
    for lateness in (0, 2_000):
        s = to_slice("k", rows, 10_500, lateness)
        assert from_slice(s, 10_500, lateness) == rows
        assert from_slice({**s, "event_timers": s["event_timers"][1:]}, 10_500, lateness) is None  # a timer fewer
        assert from_slice({**s, "triggers": [(s["windows"][0][0], {"n": 1})]}, 10_500, lateness) is None
        assert from_slice({**s, "windows": [(s["windows"][0][0], 1.5), s["windows"][1]]}, 10_500, lateness) is None


def test_a_row_cut_short_is_refused() -> None:
    blob = rows_blob([(1_000, 5_000, 7, 0), (9_000, 12_000, -3, 1)])
    assert blob.startswith(MAGIC)
    assert rows_of(blob, "k") == [(1_000, 5_000, 7, 0), (9_000, 12_000, -3, 1)]
    with pytest.raises(CheckpointIntegrityError, match="the keyed state of s:k is 71 bytes"):
        rows_of(blob[:-1], "the keyed state of s:k")


def test_which_windows_run_in_columns(tmp_path: Path) -> None:
    assert ColumnarSessions.of(_plan(tmp_path, "sum", 0).operator, FIELDS) == ColumnarSessions(GAP, 0, "sum", "_f2")
    assert ColumnarSessions.of(_plan(tmp_path, "count", 10).operator, None) == ColumnarSessions(GAP, 10, "count", None)
    assert ColumnarSessions.of(_plan(tmp_path, "max", 0).operator, None) is None  # the values are pickled


@pytest.mark.parametrize("lateness", [0, 1_000])
def test_sessions_that_touch_and_elements_on_the_edge_of_late(tmp_path: Path, lateness: int) -> None:
    plan = _plan(tmp_path, "sum", lateness)
    w1 = 20_000
    batches = [
        ([("a", 1_000, 1), ("a", 4_000, 2), ("b", 1_000, 1), ("b", 4_001, 2), ("c", 30_000, 5), ("d", 18_000, 1),
          ("e", 16_500, 1)], [w1]),
        # c touches its stored session from below; d's element is one ms from firing at once (or late),
        # e's is exactly there
        ([("c", 27_000, 1), ("c", 40_000, 1), ("d", w1 - GAP + 2, 10), ("e", w1 - GAP + 1, 10)], [w1 + 1]),
        ([], [MAX_TIMESTAMP]),
    ]
    reference, columns = _run(plan, batches, False), _run(plan, batches, True)
    for want, got in zip(reference, columns, strict=True):
        assert got["results"] == want["results"] and got["late"] == want["late"] and got["stats"] == want["stats"]
    assert reference[0]["results"] == Counter({("a", 1_000, 7_000, 3, 0): 1, ("b", 1_000, 4_000, 1, 0): 1,
                                               ("b", 4_001, 7_001, 2, 0): 1, ("e", 16_500, 19_500, 1, 0): 1})
    assert reference[2]["results"][("c", 27_000, 33_000, 6, 0)] == 1
    assert reference[2]["results"][("d", w1 - GAP + 2, 21_000, 11, 0)] == 1
    if lateness:  # e's element merges with its fired session, and the cover fires at once
        assert reference[1]["results"] == Counter({("e", 16_500, w1 + 1, 11, 0): 1})
    else:
        assert reference[1]["late"] == Counter({("e", w1 - GAP + 1, 10): 1})
    assert columns[1]["columnar_keys"] == 2  # c and d; e goes through the reference operator


def test_results_as_json_are_what_the_reference_encoding_writes() -> None:
    args = [("k", 1, 2, 3, 0), ('q"uo\\te', -5, 10, -(2**63), 2), ("ünï\tcode ☃", 0, 0, 2**63 - 1, 1),
            (-17, 1_700_000_000_000, 1_700_000_003_000, 0, 0), (2**70, 1, 2, 3, 4), ("", 0, 1, 1, 0)]
    assert results_json(args) == [to_json(WindowResult(*a)) for a in args]
    assert results_shapes(args) == sorted({shape(document(WindowResult(*a))) for a in args})
    assert len(results_shapes(args)) == 4  # keys: strings, the empty string, an int, an int beyond a long

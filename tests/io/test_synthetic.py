"""The synthetic stream: determinism, the formulas of its shape, and writing it to a log."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from lowwater.core.errors import ConfigurationError
from lowwater.io import LogRecord, PartitionedLogReader, PartitionedLogWriter, SyntheticStream

ROWS = 2_000


def _stream(**overrides: object) -> SyntheticStream:
    params: dict[str, object] = {
        "partitions": 4,
        "keys": 50,
        "events_per_second": 1_000,
        "disorder_ms": 200,
        "seed": 7,
        "start_ms": 1_700_000_000_000,
    }
    params.update(overrides)
    return SyntheticStream(**params)  # type: ignore[arg-type]


def test_deterministic_for_a_seed_and_any_batch_order() -> None:
    a, b = _stream(late_fraction=0.1, late_by_ms=500), _stream(late_fraction=0.1, late_by_ms=500)
    forward = [a.batch(i, 300) for i in range(3)]
    backward = [b.batch(i, 300) for i in reversed(range(3))][::-1]
    assert forward == backward
    assert _stream(seed=8).batch(0, 300) != forward[0]
    values = [r.value for r in forward[0]]
    assert all(set(v) == {"key", "ts", "value"} for v in values if v is not None)
    assert len({v["key"] for v in values if v is not None}) > 40  # keys drawn from k0..k49
    assert {v["key"] for v in values if v is not None} <= {f"k{k}" for k in range(50)}


def test_batch_columns_equal_batch() -> None:
    s = _stream(lagging_partition=1, lag_ms=3_000, idle_partition=2, idle_after_ms=2_500,
                late_fraction=0.2, late_by_ms=1_000)
    for i in (0, 1, 2):
        records = s.batch(i, ROWS)
        cols = s.batch_columns(i, ROWS)
        assert set(cols) == {"partition", "offset", "timestamp", "key", "ts", "value"}
        assert cols["partition"].tolist() == [r.partition for r in records]
        assert cols["offset"].tolist() == [r.offset for r in records]
        assert cols["timestamp"].tolist() == [r.timestamp for r in records]
        for name in ("key", "ts", "value"):
            assert cols[name].tolist() == [r.value[name] for r in records if r.value], name


def _by_partition(records: list[LogRecord]) -> dict[int, list[LogRecord]]:
    out: dict[int, list[LogRecord]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return out


def test_offsets_dense_and_time_follows_the_rate() -> None:
    s = _stream(events_per_second=2_000)
    records = [r for i in range(5) for r in s.batch(i, 999)]  # 999: not a multiple of 4
    parts = _by_partition(records)
    for p, rs in parts.items():
        assert [r.offset for r in rs] == list(range(len(rs))), p
    assert {p: len(rs) for p, rs in parts.items()} == s.expected_end_offsets(5, 999)
    # append time: start + n * 1000 // eps; 5 * 999 slots at 2000/s span ~2.5 s
    assert records[0].timestamp == s.start_ms
    assert records[-1].timestamp == s.start_ms + (5 * 999 - 1) * 1000 // 2_000


def test_disorder_is_bounded_per_partition() -> None:
    s = _stream(disorder_ms=300)
    for rs in _by_partition(s.batch(0, ROWS) + s.batch(1, ROWS)).values():
        seen_max = None
        behind = []
        for r in rs:
            assert r.value is not None and r.timestamp is not None
            ts = r.value["ts"]
            assert r.timestamp - 300 <= ts <= r.timestamp
            if seen_max is not None:
                behind.append(seen_max - ts)
            seen_max = ts if seen_max is None else max(seen_max, ts)
        assert max(behind) <= 300
        assert max(behind) > 200  # the disorder is really used


def test_lagging_partition_trails_by_lag_ms() -> None:
    s = _stream(lagging_partition=2, lag_ms=5_000)
    parts = _by_partition(s.batch(3, ROWS))
    mean_ts = {p: np.mean([r.value["ts"] for r in rs if r.value]) for p, rs in parts.items()}
    others = np.mean([mean_ts[p] for p in (0, 1, 3)])
    assert mean_ts[2] == pytest.approx(others - 5_000, abs=100)
    # on time in its own partition: within the disorder bound of its own maximum
    own = [r.value["ts"] for r in parts[2] if r.value]
    assert all(max(own[: k + 1]) - ts <= 200 for k, ts in enumerate(own))
    # but behind the global maximum by more than the disorder bound
    global_max = max(r.value["ts"] for p in (0, 1, 3) for r in parts[p] if r.value)
    assert 4_800 <= global_max - max(own) <= 5_200


def test_idle_partition_stops_after_idle_after_ms() -> None:
    s = _stream(idle_partition=1, idle_after_ms=3_000)  # 1000 slots/s: stops at slot 3000
    records = [r for i in range(4) for r in s.batch(i, ROWS)]  # 8 s of append time
    idle = [r for r in records if r.partition == 1]
    assert idle and max(r.timestamp or 0 for r in idle) < s.start_ms + 3_000
    assert len(idle) == 750  # slots 1, 5, ..., 2997
    assert s.expected_end_offsets(4, ROWS)[1] == 750
    assert not [r for r in s.batch(2, ROWS) if r.partition == 1]
    for p in (0, 2, 3):  # the others keep producing
        assert max(r.timestamp or 0 for r in records if r.partition == p) > s.start_ms + 7_000
    assert len(s.batch(3, ROWS)) == ROWS * 3 // 4


def test_late_fraction_and_lateness() -> None:
    s = _stream(late_fraction=0.1, late_by_ms=2_000)
    records = s.batch(0, 10_000)
    late = [r for r in records if r.value and r.timestamp is not None
            and r.value["ts"] < r.timestamp - 200]
    assert 0.08 < len(late) / len(records) < 0.12
    assert all(r.value and r.value["ts"] == (r.timestamp or 0) - 200 - 2_000 for r in late)
    assert len([r for r in _stream().batch(0, 10_000)  # late_fraction 0: none
                if r.value and r.value["ts"] < (r.timestamp or 0) - 200]) == 0


def test_write_to_a_log_and_read_back(tmp_path: Path) -> None:
    s = _stream(idle_partition=3, idle_after_ms=0, lagging_partition=0, lag_ms=1_000)
    w = PartitionedLogWriter(tmp_path, fsync=False)
    assert s.write_to(w, batches=2, rows_per_batch=100) == 150
    assert s.write_to(w, batches=1, rows_per_batch=100, start_batch=2) == 75
    r = PartitionedLogReader(tmp_path)
    assert r.partitions() == [0, 1, 2, 3]  # the idle partition exists, empty
    assert r.end_offsets() == s.expected_end_offsets(3, 100) == {0: 75, 1: 75, 2: 75, 3: 0}
    expected = sorted((rec for i in range(3) for rec in s.batch(i, 100)),
                      key=lambda rec: (rec.partition, rec.offset))
    assert r.read(dict.fromkeys(range(4), 0)) == expected
    with pytest.raises(ConfigurationError) as e:  # would not line up with the log
        s.write_to(w, batches=1, rows_per_batch=100, start_batch=0)
    assert e.value.parameter == "writer"


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"partitions": 0}, "partitions"),
        ({"keys": 0}, "keys"),
        ({"events_per_second": 0}, "events_per_second"),
        ({"disorder_ms": -1}, "disorder_ms"),
        ({"lagging_partition": 4}, "lagging_partition"),
        ({"idle_partition": -1}, "idle_partition"),
        ({"idle_partition": 1, "idle_after_ms": -5}, "idle_after_ms"),
        ({"late_fraction": 1.5}, "late_fraction"),
        ({"late_by_ms": -1}, "late_by_ms"),
    ],
)
def test_invalid_parameters(kwargs: dict[str, object], parameter: str) -> None:
    with pytest.raises(ConfigurationError) as e:
        _stream(**kwargs)
    assert e.value.parameter == parameter


def test_invalid_batch_arguments() -> None:
    with pytest.raises(ConfigurationError) as e:
        _stream().batch(-1, 10)
    assert e.value.parameter == "i"
    with pytest.raises(ConfigurationError) as e:
        _stream().batch_columns(0, -10)
    assert e.value.parameter == "rows"

"""The demo, as a new user runs it: Spark loses the lagging partition's events, lowwater does not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lowwater.cli import main
from lowwater.demo import run_demo
from lowwater.observe.metrics import read_checkpoint
from lowwater.observe.plot import series

pytestmark = pytest.mark.spark


def test_the_demo_shows_sparks_loss_and_none_for_lowwater(spark: Any, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "demo"
    assert run_demo(out) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["spark_events_lost"] > 1000, "the lagging partition's on-time events, lost by Spark"
    assert summary["windows_differing"] > 0
    assert summary["lowwater_windows"] > summary["lowwater_windows_without_idleness"], "idleness closes windows"
    late = summary["lowwater_late_by_partition"]
    assert set(late) == {"0", "1", "2", "3"} and sum(late.values()) == summary["lowwater_late"]
    printed = capsys.readouterr().out
    assert "Spark withWatermark" in printed and "events lost" in printed

    # the picture: there, not empty, and drawn from the metrics log
    picture = out / "watermarks.png"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 20_000
    drawn = json.loads((out / "watermarks.json").read_text())
    expected = json.loads(json.dumps(series(read_checkpoint(summary["checkpoint"])), default=str))
    for k in ("x", "combined", "partitions", "idle"):
        assert drawn[k] == expected[k], k
    assert any(any(flags) for flags in drawn["idle"].values()), "partition 3 goes idle in the picture"

    # status and plot on the demo's checkpoint; clear errors elsewhere
    assert main(["status", summary["checkpoint"]]) == 0
    assert "combined" in capsys.readouterr().out
    assert main(["plot", summary["checkpoint"], "-o", str(tmp_path / "again.svg")]) == 0
    assert (tmp_path / "again.svg").stat().st_size > 0
    assert main(["status", str(tmp_path / "nowhere")]) != 0
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("hello")
    assert main(["plot", str(tmp_path / "foreign"), "-o", str(tmp_path / "x.png")]) != 0
    err = capsys.readouterr().err
    assert "no such directory" in err and "not a lowwater checkpoint" in err

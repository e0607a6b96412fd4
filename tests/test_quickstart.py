"""The README's quickstart runs and gives Flink's answer (reference runtime; Spark in tests/spark)."""

from __future__ import annotations

from pathlib import Path

from examples.quickstart import HOUR, main

EXPECTED_TOTALS = {("ann", 0): 6, ("bob", HOUR): 14, ("ann", 3 * HOUR): 2}


def totals(out: dict) -> dict:
    return {(t["key"], t["window_start"]): t["value"] for t in out["totals"]}


def test_quickstart_lagging_partition_is_on_time_and_the_really_late_event_is_side_output(tmp_path: Path) -> None:
    out = main(["--out", str(tmp_path)])
    assert totals(out) == EXPECTED_TOTALS
    assert [(e["user"], e["amount"]) for e in out["late"]] == [("ann", 100)]

"""Every shared scenario transcript (shared/SCENARIOS.md) runs on the reference runtime and
matches Flink's output under the comparison rules of shared/tools/compare_scenario.py:

* ``results`` as a multiset of ``(key, window_start, window_end, value, fire_index)``;
* ``late`` as a multiset of ``(key, ts, value, partition)``, with ``source`` when there are
  several sources;
* for ``connect``: ``elements`` as a sequence of ``(source, key, ts, current_watermark)``
  and ``timers`` as a multiset of ``(timer, key, current_watermark)``;
* ``batch_watermarks`` as a sequence when the expected file has them (batch form),
  otherwise the forwarded ``watermarks`` as a sequence (per-event form).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lowwater.scenario import run_scenario

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "shared" / "scenarios"


def _scenario_files() -> list[Path]:
    """``scenarios/*.json`` and ``scenarios/next/*.json`` (several sources, all-idle)."""
    if not SCENARIO_DIR.is_dir():
        return []
    paths = [*SCENARIO_DIR.glob("*.json"), *SCENARIO_DIR.glob("next/*.json")]
    return sorted(p for p in paths if not p.name.endswith(".expected.json"))


def _results(doc: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    return Counter(
        (r["key"], r["window_start"], r["window_end"], r["value"], r.get("fire_index", 0))
        for r in doc.get("results", [])
    )


def _late(doc: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    return Counter(
        (r["key"], r["ts"], r["value"], r.get("partition", 0), r.get("source")) for r in doc.get("late", [])
    )


def _elements(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(e["source"], e["key"], e["ts"], e["current_watermark"]) for e in doc.get("elements", [])]


def _timers(doc: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    return Counter((t["timer"], t["key"], t["current_watermark"]) for t in doc.get("timers", []))


def _forwarded_watermarks(doc: dict[str, Any]) -> list[int]:
    out = []
    for w in doc.get("watermarks", []):
        if isinstance(w, dict):
            if w.get("forwarded", True):
                out.append(w["watermark"])
        else:
            out.append(w)
    return out


def test_the_shared_scenarios_folder_exists_and_holds_scenarios() -> None:
    assert SCENARIO_DIR.is_dir(), f"shared scenarios not found at {SCENARIO_DIR}"
    files = _scenario_files()
    assert files, f"no scenario files in {SCENARIO_DIR}"
    for f in files:
        expected = f.with_name(f.name[: -len(".json")] + ".expected.json")
        assert expected.is_file(), f"{f.name} has no {expected.name}"


@pytest.mark.parametrize(
    "path", _scenario_files() or [SCENARIO_DIR / "<missing>"], ids=lambda p: p.stem
)
def test_scenario_matches_flink(path: Path) -> None:
    if not path.is_file():
        pytest.fail(f"shared scenarios not found at {SCENARIO_DIR}")
    expected = json.loads(path.with_name(path.stem + ".expected.json").read_text())
    actual = run_scenario(path)
    assert "error" not in actual, actual.get("error")

    exp_r, act_r = _results(expected), _results(actual)
    assert exp_r == act_r, (
        f"results: missing {sorted((exp_r - act_r).elements())}, "
        f"unexpected {sorted((act_r - exp_r).elements())}"
    )
    exp_l, act_l = _late(expected), _late(actual)
    assert exp_l == act_l, (
        f"late: missing {sorted((exp_l - act_l).elements())}, "
        f"unexpected {sorted((act_l - exp_l).elements())}"
    )
    assert _elements(actual) == _elements(expected)
    assert _timers(actual) == _timers(expected)
    if expected.get("batch_watermarks") is not None:
        assert actual.get("batch_watermarks") == expected["batch_watermarks"]
    else:
        assert _forwarded_watermarks(actual) == _forwarded_watermarks(expected)


def test_a_scenario_can_be_given_as_a_dict() -> None:
    doc = run_scenario(
        {
            "events": [
                {"key": "a", "ts": 1_000, "value": 1},
                {"key": "a", "ts": 12_000, "value": 2},
            ],
            "watermark": {"kind": "bounded_out_of_orderness", "max_out_of_orderness_ms": 0},
            "window": {"kind": "tumbling", "size_ms": 10_000},
            "aggregate": "sum",
        }
    )
    assert _results(doc) == Counter({("a", 0, 10_000, 1, 0): 1, ("a", 10_000, 20_000, 2, 0): 1})
    assert _forwarded_watermarks(doc) == [999, 11_999, 2**63 - 1]
    assert "batch_watermarks" not in doc


def test_without_a_final_watermark_open_windows_stay_open() -> None:
    doc = run_scenario(
        {
            "events": [{"key": "a", "ts": 1_000, "value": 1}],
            "watermark": {"kind": "monotonous"},
            "window": {"kind": "tumbling", "size_ms": 10_000},
            "aggregate": "count",
            "final_watermark": False,
        }
    )
    assert doc["results"] == []
    assert _forwarded_watermarks(doc) == [999]


def test_batch_form_reports_min_while_there_is_no_watermark() -> None:
    doc = run_scenario(
        {
            "partitions": 2,
            "batches": [
                [{"key": "a", "ts": 5_000, "value": 1, "partition": 0}],
                [{"key": "a", "ts": 6_000, "value": 1, "partition": 1}],
            ],
            "watermark": {"kind": "monotonous"},
            "window": {"kind": "tumbling", "size_ms": 10_000},
            "aggregate": "sum",
        }
    )
    assert doc["batch_watermarks"] == [-(2**63), 4_999]


def test_a_failing_violation_handler_reports_what_the_job_emitted_and_the_error() -> None:
    doc = run_scenario(
        {
            "events": [
                {"key": "a", "ts": 1_000, "value": 1},
                {"key": "a", "ts": 12_000, "value": 2},
                {"key": "a", "ts": 11_000, "value": 4},
            ],
            "watermark": {"kind": "legacy_ascending", "violation_handler": "fail"},
            "window": {"kind": "tumbling", "size_ms": 10_000},
            "aggregate": "sum",
        }
    )
    assert doc["error"]["type"] == "MonotonyViolationError"
    assert "11000" in doc["error"]["message"] and "12000" in doc["error"]["message"]
    assert _results(doc) == Counter({("a", 0, 10_000, 1, 0): 1})  # fired at watermark 11999


def test_an_unknown_runtime_is_rejected() -> None:
    from lowwater.core.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as e:
        run_scenario(
            {
                "events": [],
                "watermark": {"kind": "monotonous"},
                "window": {"kind": "tumbling", "size_ms": 10},
                "aggregate": "sum",
            },
            runtime="flink",
        )
    assert e.value.parameter == "runtime"

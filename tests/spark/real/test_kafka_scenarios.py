"""Shared scenarios (shared/scenarios/*.json) through a real Kafka topic match Flink:
``lowwater scenario run FILE --runtime spark --source kafka`` (lowwater.scenario_kafka), one
Spark micro-batch per transcript batch, on the auto-chosen path.

Every scenario already runs on Spark through the file source, on all three paths
(tests/spark/test_engine.py); what only Kafka adds is the topic itself: Kafka partitions as
lowwater partitions, the clock topic that makes an empty batch a micro-batch, one run per
produced batch. CI runs the scenarios in ``KAFKA_CI``, which between them have every one of
those (with the CLI test's 12_, two-partition batches): one event per batch on two partitions
with late rows (07_), idleness with processing times on two partitions (17_), empty batches
and a time-lag watermark (20_). ``LOWWATER_KAFKA_SCENARIOS=all`` runs every shared scenario
through Kafka (each is a topic and one Spark run per batch: about 45-90 s each on a loaded
2-core machine), as this test did before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lowwater.scenario_kafka import run_scenario_on_kafka
from tests.kafka_server import KafkaBroker
from tests.spark.crash_series import JVM_OPTIONS  # C1 only, serial GC: for a JVM of its own
from tests.spark.test_engine import SCENARIOS, _compare

pytestmark = pytest.mark.spark

KAFKA_CI = ("07_", "17_", "20_")
ON_KAFKA = (SCENARIOS if os.environ.get("LOWWATER_KAFKA_SCENARIOS") == "all"
            else [p for p in SCENARIOS if p.stem.startswith(KAFKA_CI)])


def test_the_scenarios_chosen_for_kafka_are_present() -> None:
    assert len(ON_KAFKA) >= len(KAFKA_CI), f"expected {KAFKA_CI} among {[p.stem for p in SCENARIOS]}"


@pytest.mark.parametrize("scenario", ON_KAFKA, ids=lambda p: p.stem)
def test_a_shared_scenario_through_kafka_matches_flink(spark: Any, kafka: KafkaBroker, scenario: Path,
                                                       tmp_path: Path) -> None:
    expected = json.loads(scenario.with_name(scenario.stem + ".expected.json").read_text())
    actual = run_scenario_on_kafka(scenario, bootstrap_servers=kafka.bootstrap_servers, spark=spark,
                                   workdir=str(tmp_path))
    assert "error" not in actual, actual.get("error")
    assert actual["source"]["kind"] == "kafka"
    _compare(expected, actual)


def test_the_cli_runs_a_scenario_through_kafka(kafka: KafkaBroker) -> None:
    scenario = next(p for p in SCENARIOS if p.stem.startswith("12_"))
    out = subprocess.run(
        [sys.executable, "-m", "lowwater.cli", "scenario", "run", str(scenario), "--runtime", "spark",
         "--source", "kafka", "--bootstrap-servers", kafka.bootstrap_servers],
        capture_output=True, text=True, timeout=600, env={**os.environ, "JDK_JAVA_OPTIONS": JVM_OPTIONS},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    actual = json.loads(out.stdout)
    _compare(json.loads(scenario.with_name(scenario.stem + ".expected.json").read_text()), actual)
    assert actual["source"]["partitions"] == 2

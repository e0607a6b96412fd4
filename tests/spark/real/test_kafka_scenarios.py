"""Every shared scenario (shared/scenarios/*.json) through a real Kafka topic matches Flink:
``lowwater scenario run FILE --runtime spark --source kafka`` (lowwater.scenario_kafka), one
Spark micro-batch per transcript batch, on the auto-chosen path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lowwater.scenario_kafka import run_scenario_on_kafka
from tests.kafka_server import KafkaBroker
from tests.spark.test_engine import SCENARIOS, _compare

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
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
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    actual = json.loads(out.stdout)
    _compare(json.loads(scenario.with_name(scenario.stem + ".expected.json").read_text()), actual)
    assert actual["source"]["partitions"] == 2

"""The scenario transcripts the repository carries (examples/scenarios, copies of Flink's
shared transcripts) run through the CLI exactly as the README shows, and match Flink's
output under the comparison tool that ships beside them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lowwater.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "scenarios"
SCENARIOS = sorted(p for p in EXAMPLES.glob("*.json") if not p.name.endswith(".expected.json"))


def test_the_repository_carries_scenarios_with_their_expected_outputs() -> None:
    assert len(SCENARIOS) >= 9
    for s in SCENARIOS:
        assert s.with_name(s.stem + ".expected.json").is_file(), s


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_the_readme_command_reproduces_flink_on_the_reference_runtime(
    scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scenario", "run", str(scenario), "--runtime", "reference"]) == 0
    actual = tmp_path / "actual.json"
    actual.write_text(capsys.readouterr().out)
    expected = scenario.with_name(scenario.stem + ".expected.json")
    compare = subprocess.run([sys.executable, str(EXAMPLES / "compare_scenario.py"), str(expected), str(actual)],
                             capture_output=True, text=True, check=False)
    assert compare.returncode == 0, compare.stdout + compare.stderr


def test_the_comparison_tool_rejects_a_wrong_output(tmp_path: Path) -> None:
    expected = EXAMPLES / "03_late_dropped_side_output.expected.json"
    wrong = json.loads(expected.read_text())
    wrong["late"] = []
    actual = tmp_path / "wrong.json"
    actual.write_text(json.dumps(wrong))
    compare = subprocess.run([sys.executable, str(EXAMPLES / "compare_scenario.py"), str(expected), str(actual)],
                             capture_output=True, text=True, check=False)
    assert compare.returncode == 1

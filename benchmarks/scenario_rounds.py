"""The shared scenarios on Spark, round after round in one session, as the test suite runs them:
the session's JVM CPU per round. For settings of the test session, compared with
``perf stat -e task-clock`` around the whole process tree (docs/testing.md, session 55).

    python benchmarks/scenario_rounds.py --scenarios 4 --rounds 2 \
        --conf 'spark.hadoop.fs.file.impl=dev.lowwater.LocalFileSystemWithoutForks'
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _jvm_cpu_s(spark: object) -> float:
    pid = spark._jvm.ProcessHandle.current().pid()  # type: ignore[attr-defined]
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", type=int, default=4, help="the first N shared scenarios")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--paths", default="native,general")
    parser.add_argument("--conf", action="append", default=[], help="KEY=VALUE, more Spark settings")
    parser.add_argument("--no-test-conf", action="store_true", help="without the test session's own settings")
    args = parser.parse_args()

    from tests.spark.conftest import _jvm_conf

    from lowwater.scenario import run_scenario
    from lowwater.spark.session import get_or_create_session

    conf = {"spark.ui.enabled": "false", **({} if args.no_test_conf else _jvm_conf())}
    conf.update(kv.split("=", 1) for kv in args.conf)
    spark = get_or_create_session(app_name="scenario rounds", conf=conf)
    shared = ROOT.parent / "shared" / "scenarios"
    scenarios = sorted(p for p in shared.glob("*.json") if not p.name.endswith(".expected.json"))[:args.scenarios]
    for r in range(args.rounds):
        cpu, wall = _jvm_cpu_s(spark), time.monotonic()
        for scenario in scenarios:
            for path in args.paths.split(","):
                with tempfile.TemporaryDirectory() as d:
                    run_scenario(scenario, runtime="spark", path=path, spark=spark, workdir=d)
        print(f"round {r}: JVM CPU {_jvm_cpu_s(spark) - cpu:.1f} s, wall {time.monotonic() - wall:.1f} s", flush=True)


if __name__ == "__main__":
    main()

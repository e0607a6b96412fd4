"""``lowwater``: the command line.

    lowwater scenario run FILE.json [--runtime reference|spark]
    lowwater demo

Errors print one line with a hint; ``--verbose`` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from collections.abc import Sequence

from lowwater.core.errors import LowwaterError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lowwater", description="Flink's event-time model on Spark.")
    p.add_argument("--verbose", "-v", action="store_true", help="show tracebacks and debug logs")
    sub = p.add_subparsers(dest="command", required=True)

    sc = sub.add_parser("scenario", help="run scenario transcripts (shared/SCENARIOS.md)")
    sc_sub = sc.add_subparsers(dest="scenario_command", required=True)
    run = sc_sub.add_parser("run", help="run one scenario and print its output JSON")
    run.add_argument("file", help="the scenario JSON file")
    run.add_argument("--runtime", choices=["reference", "spark"], default="reference")

    demo = sub.add_parser("demo", help="a lagging and an idle partition: Spark's watermark vs lowwater")
    demo.add_argument("--out", default="out/demo", help="where the demo writes its files")
    return p


def _scenario_run(args: argparse.Namespace) -> int:
    from lowwater.scenario import run_scenario

    doc = run_scenario(args.file, runtime=args.runtime)
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    if "error" in doc:
        print(f"lowwater: the job failed: {doc['error']['message']}", file=sys.stderr)
        return 1
    return 0


def _demo(args: argparse.Namespace) -> int:
    from lowwater.demo import run_demo

    return int(run_demo(args.out))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "scenario":
            return _scenario_run(args)
        if args.command == "demo":
            return _demo(args)
    except LowwaterError as e:
        if args.verbose:
            traceback.print_exc()
        print(f"lowwater: error: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        if args.verbose:
            traceback.print_exc()
        print(f"lowwater: error: no such file: {e.filename}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())

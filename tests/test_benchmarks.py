"""The benchmarks that time lowwater's functions by wrapping them name functions that exist.

A benchmark names private functions of the engine; when one is renamed the benchmark fails at its
start, after its data are written (``benchmarks/run.py``'s profile step did, at its end)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("name", ["profile_native", "native_jobs"])
def test_every_function_a_benchmark_times_exists(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module(name)
    try:
        missing = [f"{getattr(t[0], '__name__', t[0])}.{t[1]}" for t in module.timed() if not hasattr(t[0], t[1])]
    finally:
        sys.modules.pop(name, None)
    assert module.timed() and not missing, f"benchmarks/{name}.py wraps functions that no longer exist: {missing}"

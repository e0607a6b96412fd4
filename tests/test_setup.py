"""What ``./dev`` sets up, as the test processes find it."""

from __future__ import annotations

import importlib
import importlib.util
import os

import pytest


@pytest.mark.parametrize("module", ["pyspark.sql.dataframe", "pyspark.worker", "pandas.core.frame",
                                    "pyarrow.pandas_compat",
                                    "py4j.java_gateway", "lowwater.spark.engine"])
def test_the_modules_every_spark_python_process_imports_are_compiled_to_bytecode(module: str) -> None:
    """With ``PYTHONDONTWRITEBYTECODE`` set (as on this project's machines) Python writes no ``.pyc``
    of its own, and the venv had none (uv compiles nothing unless asked): every driver, Python
    worker and streaming source runner compiled pyspark, pandas and pyarrow from source again,
    1.2 s of CPU each, and a test file of fresh drivers took 96 s where it takes 86 (session 46)."""
    source = importlib.import_module(module).__file__
    assert source is not None and source.endswith(".py")
    cached = importlib.util.cache_from_source(source)
    assert os.path.exists(cached), f"{module}: no {cached}; run ./dev setup (it compiles the venv and src/)"

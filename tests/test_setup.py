"""What ``./dev`` sets up, as the test processes find it."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

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


def test_lowwater_s_jar_is_built_again_when_pyspark_changes(tmp_path: Path) -> None:
    """``scripts/build_jar.sh`` builds ``jars/spark/lowwater-jvm.jar`` against the installed pyspark's
    jars, once: again when a Java source is newer, and again when pyspark is not the version it was
    built against (an upgrade kept a jar compiled against the old Spark's classes)."""
    root = Path(__file__).resolve().parent.parent
    shutil.copytree(root / "jvm", tmp_path / "jvm")
    (tmp_path / "scripts").mkdir()
    shutil.copy(root / "scripts" / "build_jar.sh", tmp_path / "scripts")
    jar, stamp = tmp_path / "jars" / "spark" / "lowwater-jvm.jar", tmp_path / "jars" / "lowwater-jvm.pyspark"

    def build() -> str:
        run = subprocess.run(["bash", str(tmp_path / "scripts" / "build_jar.sh")], capture_output=True, text=True,
                             env={**os.environ, "LOWWATER_PYTHON": sys.executable}, timeout=300)
        assert run.returncode == 0, run.stderr
        return run.stderr

    import pyspark

    assert "built jars/spark/lowwater-jvm.jar" in build()
    assert stamp.read_text().strip() == pyspark.__version__
    with zipfile.ZipFile(jar) as z:
        assert "dev/lowwater/KafkaValueReader.class" in z.namelist()
    assert build() == ""  # built, against this pyspark: nothing to do
    stamp.write_text("3.5.1\n")  # built against another pyspark
    assert f"against pyspark {pyspark.__version__}" in build()
    assert stamp.read_text().strip() == pyspark.__version__

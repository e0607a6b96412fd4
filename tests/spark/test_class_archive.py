"""The driver's class archive (lowwater.spark.class_archive): keyed by class path, and mapped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lowwater.spark import class_archive
from lowwater.spark.jvm import spark_jars


def test_there_is_no_archive_unless_a_folder_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(class_archive.ENV_DIR, raising=False)
    assert class_archive.archive_for("") is None
    assert class_archive.driver_options("") == []


def test_each_class_path_has_its_own_archive_and_only_a_built_one_is_used(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(class_archive.ENV_DIR, str(tmp_path))
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"PK")
    plain, extra = class_archive.archive_for(""), class_archive.archive_for(str(jar))
    assert plain is not None and extra is not None and plain != extra
    assert class_archive.driver_options("") == []  # not built: the JVM starts as usual
    plain.write_bytes(b"")
    assert class_archive.driver_options("")[0] == f"-XX:SharedArchiveFile={plain}"
    assert "-Xshare:auto" in class_archive.driver_options("")  # a stale archive is ignored, not fatal
    assert class_archive.driver_options(str(jar)) == []
    jar.write_bytes(b"PK changed")  # a changed jar is another class path
    os.utime(jar, (1, 1))
    assert class_archive.archive_for(str(jar)) != extra


@pytest.mark.spark
def test_a_driver_maps_the_archive_built_for_its_class_path(tmp_path: Path) -> None:
    folder = os.environ.get(class_archive.ENV_DIR) or str(tmp_path)  # the suite's (tests/conftest.py)
    env = {**os.environ, class_archive.ENV_DIR: folder, "PYSPARK_PYTHON": sys.executable}
    env.pop("JDK_JAVA_OPTIONS", None)
    built = subprocess.run([sys.executable, "-m", "lowwater.spark.class_archive"], env=env,
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    archive = Path(built.stdout.strip().splitlines()[-1])
    assert archive.is_file() and archive.parent == Path(folder)
    assert archive == class_archive.archive_for(os.pathsep.join(spark_jars())) or not spark_jars()
    probe = ("from lowwater.spark.session import get_or_create_session\n"
             "s = get_or_create_session(conf={'spark.ui.enabled': 'false'})\n"
             "assert s.range(3).count() == 3\n"
             "pid = s.sparkContext._gateway.proc.pid\n"
             "print(*sorted({l.split()[-1] for l in open(f'/proc/{pid}/maps') if l.rstrip().endswith('.jsa')}))\n"
             "print(s.sparkContext.getConf().get('spark.driver.extraJavaOptions'))\n")
    run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"-XX:SharedArchiveFile={archive}" in run.stdout
    assert str(archive) in run.stdout.splitlines()[0].split(), run.stdout  # the JVM mapped it (and the JDK's own)
    assert "cds" not in run.stderr.lower(), "the JVM should say nothing about the archive"


def test_a_jar_that_is_not_there_is_one_line_before_a_jvm_starts(tmp_path: Path) -> None:
    """The command in docs/cluster.md printed the workload's whole traceback for a mistyped jar."""
    env = {**os.environ, class_archive.ENV_DIR: str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "lowwater.spark.class_archive", "--jar", str(tmp_path / "no.jar")],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == f"lowwater.spark.class_archive: jar(s) not found: {tmp_path / 'no.jar'}"

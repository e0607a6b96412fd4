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


def test_a_build_keeps_the_archives_used_last_and_removes_the_rest(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each changed jar made a new 190 MB archive and none was ever removed: a developer's
    jars/cds held 1.1 GB after a day of jar builds."""
    monkeypatch.setenv(class_archive.ENV_DIR, str(tmp_path))
    archives = [tmp_path / f"spark-driver-{i:020d}.jsa" for i in range(7)]
    for i, a in enumerate(archives):  # made in order, 0 oldest
        a.write_bytes(b"")
        os.utime(a, (1_000 + i, 1_000 + i))
    lock = tmp_path / f"{archives[0].name}.lock"
    lock.write_bytes(b"")
    os.utime(lock, (5_000, 5_000))  # the oldest archive, used by a driver last of all
    gone = tmp_path / f"{archives[1].name}.999999999.partial"  # a build whose process is gone
    mine = tmp_path / f"{archives[1].name}.{os.getpid()}.partial"  # a build still running
    gone.write_bytes(b"")
    mine.write_bytes(b"")
    failed, building = (tmp_path / f"spark-driver-{n}.jsa.lock" for n in ("failed", "building"))
    failed.write_bytes(b"")
    os.utime(failed, (1_000, 1_000))  # a lock without its archive, from a build that failed long ago
    building.write_bytes(b"")  # one a build holds now
    built = archives[2]
    removed = class_archive._prune(tmp_path, built, keep=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [archives[0].name, lock.name, built.name, archives[6].name, archives[5].name, mine.name, building.name])
    assert {failed, gone, archives[1], archives[3], archives[4]} <= set(removed)


def test_a_driver_that_maps_an_archive_marks_it_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(class_archive.ENV_DIR, str(tmp_path))
    archive = class_archive.archive_for("")
    assert archive is not None
    archive.write_bytes(b"")
    os.utime(archive, (1_000, 1_000))
    assert class_archive.driver_options("")
    lock = tmp_path / f"{archive.name}.lock"
    assert lock.is_file() and lock.stat().st_mtime > 1_000_000_000  # now, not the archive's 1970
    other = tmp_path / "spark-driver-00000000000000000000.jsa"  # built after it, never used
    other.write_bytes(b"")
    os.utime(other, (2_000, 2_000))
    newest = tmp_path / "spark-driver-99999999999999999999.jsa"
    newest.write_bytes(b"")
    class_archive._prune(tmp_path, newest, keep=2)
    assert archive.is_file() and newest.is_file() and not other.exists()


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

"""A JVM class-data archive (AppCDS) that makes a Spark driver start in about half the CPU.

A Spark driver JVM loads and verifies some 15,000 classes before it runs its first job:
measured here, 11–12 s of JVM CPU from ``get_or_create_session()`` to the end of a first small
job, against 6–7 s with an archive of those classes mapped from a file (Java's dynamic
class-data sharing, JDK 13+). Processes that start many drivers (the crash tests, a CLI run
per batch of files, a scheduler starting short jobs) gain the most.

Opt in with ``LOWWATER_JVM_ARCHIVE_DIR=<folder>``, then build the archive for each class path
you use (a driver's class path is its ``spark.driver.extraClassPath`` plus Spark's own jars):

    python -m lowwater.spark.class_archive [--jar PATH ...]

``--jar`` names the same extra jars the driver is given (``get_or_create_session(jars=...)``);
lowwater's own (``jars/spark``) are added as the session adds them. The build starts a driver,
runs a streaming query that does what lowwater's paths do on tiny data, and has the JVM write
the classes it loaded to the archive when it exits.

:func:`get_or_create_session` then adds ``-XX:SharedArchiveFile`` to the driver's JVM options
when an archive for exactly its class path exists (the file name is a digest of the Java
binary, Spark's jars and the class path). Nothing changes otherwise: a missing, stale or
unreadable archive means the JVM loads its classes as usual (``-Xshare:auto``), silently.
A driver started by ``spark-submit`` is already running and is left alone.

Each archive is about 190 MB, and a class path's archive is another when a jar in it changes
(``./dev`` fetching a new version, ``scripts/build_jar.sh`` building lowwater's own again).
A driver that maps an archive marks it used (its ``.lock`` file's time), and a build keeps the
:data:`KEEP` archives used last: the folder stays under a gigabyte however often the jars change.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["archive_for", "build", "driver_options", "dump_option"]

ENV_DIR = "LOWWATER_JVM_ARCHIVE_DIR"
#: Set by :func:`build` for the child whose JVM writes the archive when it exits.
_ENV_DUMP = "LOWWATER_JVM_ARCHIVE_DUMP"
_QUIET = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")
KEEP = 4
"""Archives a build leaves in the folder, the one it built and those drivers used last: the test
suite's two class paths (with and without PostgreSQL's driver) and the two before a jar changed."""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else "java"


def _fingerprint(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{int(st.st_mtime)}"


def _key(extra_class_path: str) -> str:
    """A digest of everything the archive depends on: the JVM, Spark's jars and the class path."""
    import pyspark

    spark_jars = Path(pyspark.__file__).parent / "jars"
    parts = [_fingerprint(_java()), pyspark.__version__, str(spark_jars)]
    parts += sorted(_fingerprint(str(p)) for p in spark_jars.glob("*.jar"))
    parts += [_fingerprint(p) for p in extra_class_path.split(os.pathsep) if p]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def archive_for(extra_class_path: str) -> Path | None:
    """Where the archive for a driver with this ``spark.driver.extraClassPath`` is or would be;
    None unless ``LOWWATER_JVM_ARCHIVE_DIR`` is set."""
    folder = os.environ.get(ENV_DIR)
    return Path(folder) / f"spark-driver-{_key(extra_class_path)}.jsa" if folder else None


def driver_options(extra_class_path: str) -> list[str]:
    """JVM options that map the archive for this class path, or [] when there is none."""
    path = archive_for(extra_class_path)
    if path is None or not path.is_file():
        return []
    # used now: the archives a build keeps are those used last (_prune); in a folder this user
    # cannot write, the archive is still used
    with contextlib.suppress(OSError):
        _lock(path).touch()
    return [f"-XX:SharedArchiveFile={path}", *_QUIET]


def _lock(archive: Path) -> Path:
    """The file a build holds locked while it writes ``archive``, whose time says when it was last used."""
    return archive.with_name(f"{archive.name}.lock")


def _prune(folder: Path, built: Path, keep: int = KEEP) -> list[Path]:
    """Remove the archives in ``folder`` beyond the ``keep`` used last (``built`` always kept), with
    their lock files, the partial archives of builds whose process is gone and the lock files of
    builds that failed; return those removed.
    A JVM that has an archive mapped keeps its pages when the file is removed."""
    def used(archive: Path) -> float:
        times = [archive.stat().st_mtime]
        if _lock(archive).exists():
            times.append(_lock(archive).stat().st_mtime)
        return max(times)

    removed: list[Path] = []
    try:
        archives = sorted((a for a in folder.glob("spark-driver-*.jsa") if a != built), key=used, reverse=True)
    except OSError:  # one removed by another build while listed: the next build prunes
        return removed
    for old in archives[max(0, keep - 1):]:
        for f in (old, _lock(old)):
            try:
                f.unlink()
                removed.append(f)
            except FileNotFoundError:
                pass
    for lock in folder.glob("spark-driver-*.jsa.lock"):  # of a build that failed, an hour ago or more
        try:
            if not lock.with_suffix("").exists() and lock.stat().st_mtime < time.time() - 3600:
                lock.unlink()
                removed.append(lock)
        except FileNotFoundError:
            pass
    for partial in folder.glob("spark-driver-*.jsa.*.partial"):  # <archive>.<pid>.partial
        pid = partial.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            partial.unlink(missing_ok=True)
            removed.append(partial)
    return removed


def dump_option() -> list[str]:
    """In the child :func:`build` starts: have the JVM write its classes to the archive at exit."""
    target = os.environ.get(_ENV_DUMP)
    return [f"-XX:ArchiveClassesAtExit={target}"] if target else []


def build(jars: list[str], timeout_s: float = 600) -> Path:
    """Build (or keep) the archive for a driver given ``jars``; return its path."""
    from lowwater.spark.jvm import spark_jars

    missing = [j for j in jars if not os.path.isfile(j)]
    if missing:  # before a JVM is started for them, whose traceback said so
        raise FileNotFoundError(f"jar(s) not found: {', '.join(missing)}")
    wanted = [os.path.abspath(j) for j in jars]
    wanted += [j for j in spark_jars() if j not in wanted]
    target = archive_for(os.pathsep.join(wanted))
    if target is None:
        raise SystemExit(f"set {ENV_DIR} to the folder the archive goes in")
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(_lock(target), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process building the same archive: wait for it
        if not target.is_file():
            _dump(jars, target, timeout_s)
            _prune(target.parent, target)
    return target


def _dump(jars: list[str], target: Path, timeout_s: float) -> None:
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="lowwater-archive-") as work:
        env = {**os.environ, _ENV_DUMP: str(partial),
               "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
        # the driver's own options, as get_or_create_session gives them, and C1 only: what is
        # archived is classes, not compiled code, and C2 compiling the workload cost a third of its
        # CPU (77 CPU-seconds against 53; drivers started from either archive start alike)
        env["JDK_JAVA_OPTIONS"] = "-XX:TieredStopAtLevel=1"
        child = subprocess.run([sys.executable, "-m", "lowwater.spark.archive_workload", work,
                                *[a for j in jars for a in ("--jar", j)]],
                               env=env, capture_output=True, text=True, timeout=timeout_s)
        if child.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"the archive's workload failed (exit {child.returncode}):\n{child.stderr[-4000:]}")
        pid = int(child.stdout.split("jvm-pid=")[1].split()[0])
        class_path = child.stdout.split("jvm-class-path=")[1].splitlines()[0]
        deadline = time.monotonic() + 120
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:  # the JVM dumps as it exits
            time.sleep(0.2)
    # A JVM maps an archive it is given whole, and dies of SIGBUS on a truncated one: only an
    # archive that a JVM with the driver's class path maps (-Xshare:on fails otherwise) is kept.
    check = subprocess.run([_java(), "-Xshare:on", f"-XX:SharedArchiveFile={partial}", "-cp", class_path,
                            "-version"], capture_output=True, text=True, timeout=120) if partial.is_file() else None
    if check is None or check.returncode != 0 or Path(f"/proc/{pid}").exists():
        partial.unlink(missing_ok=True)
        raise RuntimeError("the JVM wrote no usable archive" + (f":\n{check.stdout}{check.stderr}" if check else ""))
    os.replace(partial, target)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build the JVM class archive for a Spark driver's class path.")
    parser.add_argument("--jar", action="append", default=[], help="an extra jar the driver is given (repeatable)")
    args = parser.parse_args(argv)
    try:
        print(build(args.jar))
    except (FileNotFoundError, RuntimeError) as e:  # a user's mistake (a jar's path) or the JVM's: one line
        raise SystemExit(f"lowwater.spark.class_archive: {e}") from None


if __name__ == "__main__":
    main()

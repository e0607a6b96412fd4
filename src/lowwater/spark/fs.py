"""The checkpoint's file system: a local directory, or any Hadoop URI (``file:``, ``hdfs:``, ``s3a:``...).

Everything lowwater keeps under a checkpoint goes through one :class:`CheckpointFS`:

* a plain path (``/data/ck``) is a local directory, written with Python's ``os`` calls (the
  engine first qualifies it against Spark's ``fs.defaultFS`` with :func:`resolve`, so on a
  cluster whose default file system is HDFS it is that file system's URI);
* a URI with a scheme (``file:///data/ck``, ``hdfs://nn:8020/ck``, ``s3a://bucket/ck``) goes
  through Hadoop's ``FileContext``/``FileSystem`` in Spark's driver JVM, with the session's
  Hadoop configuration: the same classes Spark's own checkpoint uses, so wherever Spark can
  keep its checkpoint, lowwater can keep its own.

Small files are written atomically: to a temporary name, then renamed over the target
(``rename(2)`` locally, ``FileContext.rename(..., OVERWRITE)`` on Hadoop, as Spark's
``FileContextBasedCheckpointFileManager`` does). A crash leaves the old or the new file.
Files are created owner-only (mode 600) where the file system has permissions.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from lowwater.spark import faults
from lowwater.util.files import atomic_write, is_uri

__all__ = ["CheckpointFS", "HadoopFS", "LocalFS", "checkpoint_fs", "is_uri", "join", "resolve"]


def resolve(location: str, spark: Any) -> str:
    """``location`` as Spark resolves it: a plain path against the session's ``fs.defaultFS``.

    Spark reads and writes a path without a scheme on the default file system of its Hadoop
    configuration (HDFS on most clusters), and so does its streaming checkpoint. lowwater's own
    files under the same checkpoint must land beside them: a plain path whose default file
    system is not the local one becomes that file system's URI (``/ck`` ->
    ``hdfs://nn:8020/ck``), relative paths against its working directory, as Hadoop qualifies
    them. On the local file system (Spark's default) the plain path is kept, and stays a
    :class:`LocalFS` directory. A URI, and any path under Spark Connect (no driver JVM to ask),
    are returned as they are."""
    jvm = getattr(spark, "_jvm", None)
    if is_uri(location) or jvm is None:
        return location
    path = _hadoop_classes(jvm)[0](location)
    qualified = path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf()).makeQualified(path)
    return location if qualified.toUri().getScheme() == "file" else str(qualified.toString())


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


class CheckpointFS(Protocol):
    """What lowwater needs of a file system; paths are strings under the checkpoint."""

    def read(self, path: str) -> bytes | None: ...
    def write_atomic(self, path: str, data: bytes, fault_batch: int | None = None) -> None: ...
    def exists(self, path: str) -> bool: ...
    def is_file(self, path: str) -> bool: ...
    def delete(self, path: str) -> None: ...
    def names(self, directory: str) -> list[str]: ...
    def mkdirs(self, directory: str) -> None: ...
    def replace_dir(self, src: str, dst: str) -> None: ...
    def size_bytes(self, directory: str) -> int: ...


class LocalFS:
    """A local directory, with Python's ``os``."""

    def read(self, path: str) -> bytes | None:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            return None

    def write_atomic(self, path: str, data: bytes, fault_batch: int | None = None) -> None:
        """Write ``data`` to a temporary file (mode 600), then rename it to ``path``.

        With ``fault_batch``, a ``state_write`` fault for that batch (:mod:`lowwater.spark.faults`)
        kills the process after half of the bytes are in the temporary file."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)

        def half_then_die(f: BinaryIO) -> None:
            if fault_batch is not None and faults.armed("state_write", fault_batch):
                f.write(data[: len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
                faults.at("state_write", fault_batch)

        atomic_write(p, data, fsync=True, private=True, before_content=half_then_die)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_file(self, path: str) -> bool:
        return os.path.exists(path) and not os.path.isdir(path)

    def delete(self, path: str) -> None:
        p = Path(path)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)

    def names(self, directory: str) -> list[str]:
        try:
            return sorted(os.listdir(directory))
        except FileNotFoundError:
            return []

    def mkdirs(self, directory: str) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)

    def replace_dir(self, src: str, dst: str) -> None:
        if os.path.exists(dst):
            shutil.rmtree(dst)
        os.replace(src, dst)

    def size_bytes(self, directory: str) -> int:
        total = 0
        for root, _, files in os.walk(directory):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total


_CLASSES: dict[int, tuple[Any, tuple[Any, ...]]] = {}


def _hadoop_classes(jvm: Any) -> tuple[Any, ...]:
    """The Hadoop classes :class:`HadoopFS` uses, looked up once per JVM: py4j resolves
    ``jvm.org.apache.hadoop.fs.Path`` one package at a time, and each package (``org``,
    ``org.apache``, ...) is a class load that fails after searching every jar, about 0.5 ms of the
    JVM's CPU each: 2 ms for every path made that way."""
    got = _CLASSES.get(id(jvm))
    if got is None or got[0] is not jvm:
        fs = jvm.org.apache.hadoop.fs
        got = _CLASSES[id(jvm)] = (jvm, (fs.Path, fs.FileContext, fs.permission.FsPermission, fs.Options.Rename,
                                         jvm.org.apache.commons.io.IOUtils))
    return got[1]


class HadoopFS:
    """Any Hadoop file system, through the Spark driver's JVM (``spark._jvm``)."""

    def __init__(self, spark: Any) -> None:
        jvm = getattr(spark, "_jvm", None)
        if jvm is None:
            from lowwater.core.errors import ConfigurationError

            raise ConfigurationError("spark", "a checkpoint URI needs a classic (py4j) SparkSession, "
                                              "not Spark Connect: use a local path, or a classic session")
        self.gateway = spark.sparkContext._gateway
        self.conf = spark._jsc.hadoopConfiguration()
        self._Path, self._FileContext, self._FsPermission, self._Rename, self._IOUtils = _hadoop_classes(jvm)

    def _path(self, path: str) -> Any:
        return self._Path(path)

    def _fs(self, p: Any) -> Any:
        return p.getFileSystem(self.conf)

    def read(self, path: str) -> bytes | None:
        p = self._path(path)
        fs = self._fs(p)
        if not fs.exists(p):
            return None
        stream = fs.open(p)
        try:
            return bytes(self._IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write_atomic(self, path: str, data: bytes, fault_batch: int | None = None) -> None:
        """Write ``data`` to ``path`` whole or not at all: on a store whose new file appears only
        when its stream closes (S3A: an object is one PUT, or a multipart upload completed at
        close; Hadoop's ``fs.capability.outputstream.abortable``), straight to ``path``; elsewhere
        (HDFS) to a temporary file, synced, then renamed over ``path``. On S3 the rename was a copy
        and a delete, and the temporary file's creation and the rename's checks about twenty
        requests in all, for each of the few files a batch writes."""
        p = self._path(path)
        fs = self._fs(p)
        whole_at_close = bool(fs.hasPathCapability(p, "fs.capability.outputstream.abortable"))
        if whole_at_close:
            tmp = p
        else:
            tmp = self._path(join(path.rsplit("/", 1)[0], f".{path.rsplit('/', 1)[1]}.tmp"))
            fs.mkdirs(p.getParent())
        out = fs.create(tmp, True)
        # an object store (s3a) has no hsync: its object is written whole at close, and S3A warns
        # at a call (or, with fs.s3a.downgrade.syncable.exceptions=false, raises)
        sync = out.hsync if out.hasCapability("hsync") else (lambda: None)
        try:
            if fault_batch is not None and faults.armed("state_write", fault_batch):
                out.write(bytearray(data[: len(data) // 2]))
                sync()
                faults.at("state_write", fault_batch)
            out.write(bytearray(data))
            sync()
        finally:
            out.close()
        if whole_at_close:
            return
        with contextlib.suppress(Exception):  # a store without permissions: nothing to restrict
            fs.setPermission(tmp, self._FsPermission("600"))
        fc = self._FileContext.getFileContext(p.toUri(), self.conf)
        options = self.gateway.new_array(self._Rename, 1)
        options[0] = self._Rename.OVERWRITE
        fc.rename(tmp, p, options)

    def exists(self, path: str) -> bool:
        p = self._path(path)
        return bool(self._fs(p).exists(p))

    def is_file(self, path: str) -> bool:
        p = self._path(path)
        fs = self._fs(p)
        return bool(fs.exists(p)) and bool(fs.getFileStatus(p).isFile())

    def delete(self, path: str) -> None:
        p = self._path(path)
        self._fs(p).delete(p, True)

    def names(self, directory: str) -> list[str]:
        p = self._path(directory)
        fs = self._fs(p)
        if not fs.exists(p):
            return []
        return sorted(str(s.getPath().getName()) for s in fs.listStatus(p))

    def mkdirs(self, directory: str) -> None:
        p = self._path(directory)
        self._fs(p).mkdirs(p)

    def replace_dir(self, src: str, dst: str) -> None:
        s, d = self._path(src), self._path(dst)
        fs = self._fs(d)
        if fs.exists(d):
            fs.delete(d, True)
        if not fs.rename(s, d):
            raise OSError(f"could not rename {src} to {dst}")

    def size_bytes(self, directory: str) -> int:
        p = self._path(directory)
        fs = self._fs(p)
        return int(fs.getContentSummary(p).getLength()) if fs.exists(p) else 0


def checkpoint_fs(location: str, spark: Any = None) -> CheckpointFS:
    """The file system of ``location``: :class:`LocalFS` for a plain path, else :class:`HadoopFS`."""
    if not is_uri(str(location)):
        return LocalFS()
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    return HadoopFS(spark)

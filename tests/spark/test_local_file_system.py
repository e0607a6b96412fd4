"""The test session's ``file:`` (``dev.lowwater.LocalFileSystemWithoutForks``) answers as Hadoop's own
local file system does, for both of Spark's ways to it (``FileSystem`` and ``FileContext``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from tests.spark.conftest import LOCAL_FS_CLASS


def _hadoop(spark: Any, ours: bool) -> tuple[Any, Any]:
    """(FileSystem, FileContext) for ``file:``: the session's, or Hadoop's own classes."""
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
    if not ours:
        conf.set("fs.file.impl", "org.apache.hadoop.fs.LocalFileSystem")
        conf.set("fs.AbstractFileSystem.file.impl", "org.apache.hadoop.fs.local.LocalFs")
        conf.setBoolean("fs.file.impl.disable.cache", True)
    uri = jvm.java.net.URI("file:///")
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf)
    fc = jvm.org.apache.hadoop.fs.FileContext.getFileContext(uri, conf)
    return fs, fc


def _status(spark: Any, how: Any, path: str) -> tuple[Any, ...]:
    try:
        st = how.getFileLinkStatus(spark._jvm.org.apache.hadoop.fs.Path(path))
    except Exception as e:  # py4j's error names the Java exception's class
        return ("error", "FileNotFoundException" in str(e))
    return (st.isSymlink(), str(st.getSymlink()) if st.isSymlink() else None, st.isDirectory(), st.getLen())


def test_the_sessions_file_system_is_ours_and_answers_as_hadoops(spark: Any, tmp_path: Path) -> None:
    fs, fc = _hadoop(spark, ours=True)
    assert fs.getClass().getName() == LOCAL_FS_CLASS
    assert fc.getDefaultFileSystem().getClass().getName() == LOCAL_FS_CLASS + "$Fs"
    theirs_fs, theirs_fc = _hadoop(spark, ours=False)
    assert theirs_fs.getClass().getName() == "org.apache.hadoop.fs.LocalFileSystem"

    (tmp_path / "file").write_text("12345")
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path / "file", tmp_path / "link")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    paths = [str(tmp_path / n) for n in ("file", "dir", "link", "dangling", "missing")]
    paths += ["file:" + p for p in paths]  # as a URI Hadoop's readlink never sees a link
    for p in paths:
        assert _status(spark, fc, p) == _status(spark, theirs_fc, p), p
        assert _status(spark, fs.getRawFileSystem(), p) == _status(spark, theirs_fs.getRawFileSystem(), p), p
    assert _status(spark, fc, str(tmp_path / "link"))[:2] == (True, "file:" + str(tmp_path / "file"))  # a link is seen
    assert _status(spark, fc, str(tmp_path / "missing")) == ("error", True)


def test_created_files_and_directories_get_the_permissions_hadoop_gives(spark: Any, tmp_path: Path) -> None:
    jvm = spark._jvm
    perm = jvm.org.apache.hadoop.fs.permission.FsPermission
    modes = {}
    for ours in (True, False):
        fs, fc = _hadoop(spark, ours)
        base = tmp_path / ("ours" if ours else "theirs")
        Path_ = jvm.org.apache.hadoop.fs.Path
        fs.mkdirs(Path_(str(base / "a" / "b")), perm.createImmutable(0o750))
        fs.createFile(Path_(str(base / "a" / "f"))).permission(perm.createImmutable(0o640)).build().close()
        fc.mkdir(Path_(str(base / "c")), perm.createImmutable(0o700), True)
        fs.setPermission(Path_(str(base / "a" / "f")), perm.createImmutable(0o604))
        fs.setPermission(Path_(str(base / "c")), perm.createImmutable(0o1777))  # a sticky bit: Hadoop's own way
        modes[ours] = {p.relative_to(base).as_posix(): stat.S_IMODE(p.stat().st_mode)
                       for p in sorted(base.rglob("*")) if not p.name.endswith(".crc")}
    assert modes[True] == modes[False]
    assert modes[True]["a/f"] == 0o604 and modes[True]["c"] == 0o1777

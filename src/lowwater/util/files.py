"""One way to replace a file atomically: write a temporary beside it, then ``os.replace``.

A reader sees the old file or the new one, never part of one (``rename(2)`` is atomic
within a directory). With ``fsync`` the new bytes are on disk before the name points at
them, so a crash after :func:`atomic_write` returns cannot leave an empty or torn file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write", "is_uri", "same_place"]

Content = bytes | str | Callable[[str], None]
"""The new file's bytes, text (written as UTF-8), or a function that writes the temporary at
the path it is given (a Parquet writer, say)."""


def is_uri(location: str) -> bool:
    """Whether ``location`` names a scheme (``file:``, ``hdfs:``...) rather than a local path
    (a Windows drive letter, ``C:``, is a path)."""
    head, sep, _ = location.partition(":")
    return bool(sep) and len(head) > 1 and head.replace("+", "").replace("-", "").replace(".", "").isalnum()


def same_place(location: str) -> str:
    """``location`` spelled one way for comparing where two sinks write: a local path (or a
    ``file:`` URI of one) absolute and normalised, another URI without its trailing slashes.
    ``/t``, ``/t/``, ``file:/t``, ``file:///t`` and ``t`` run from ``/`` are one place."""
    if location.startswith("file:"):
        from urllib.parse import unquote, urlparse

        parsed = urlparse(location)
        if parsed.netloc in ("", "localhost"):
            location = unquote(parsed.path) or "/"
    if is_uri(location):
        return location.rstrip("/") or location
    return os.path.normpath(os.path.abspath(location))


def atomic_write(
    path: str | os.PathLike[str], content: Content, *, fsync: bool, private: bool = False,
    unique_tmp: bool = False, before_content: Callable[[BinaryIO], None] | None = None,
) -> None:
    """Replace ``path`` with ``content``, atomically.

    Parameters
    ----------
    fsync:
        ``fsync`` the temporary before renaming it (durability, not only atomicity).
    private:
        Create the temporary with mode ``0o600`` (else ``0o666`` less the umask, as ``open``).
    unique_tmp:
        ``False``: the temporary is ``.<name>.tmp``, one per target, which a write interrupted
        by a crash leaves for the next write to overwrite. ``True``: a fresh ``.tmp-<name>-*``
        (mode ``0o600``, as :func:`tempfile.mkstemp` makes it), for writers that may run
        concurrently; it is removed when the write fails.
    before_content:
        Called with the open temporary before ``content`` is written (fault injection: write
        half of it, then die). Bytes and text content only.
    """
    p = Path(path)
    if unique_tmp:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".tmp-{p.name}-")
        try:
            _write(fd, tmp, content, fsync, before_content)
            os.replace(tmp, p)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return
    tmp = str(p.with_name(f".{p.name}.tmp"))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o666)
    _write(fd, tmp, content, fsync, before_content)
    os.replace(tmp, p)


def _write(fd: int, tmp: str, content: Content, fsync: bool, before: Callable[[BinaryIO], None] | None) -> None:
    if callable(content):
        os.close(fd)
        content(tmp)
        if fsync:
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        return
    with os.fdopen(fd, "wb") as f:
        if before is not None:
            before(f)
        f.write(content.encode("utf-8") if isinstance(content, str) else content)
        f.flush()
        if fsync:
            os.fsync(f.fileno())

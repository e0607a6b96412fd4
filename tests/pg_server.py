"""A throwaway, real PostgreSQL server for tests.

    with postgres_server() as pg:
        ...  # pg.jdbc_url, pg.user, pg.database, pg.jdbc_jar

What it does: finds the server binaries (``/usr/lib/postgresql/<version>/bin``, the newest;
``LOWWATER_PG_BIN`` overrides), ``initdb``s a fresh cluster in a new temp dir, starts it with
``pg_ctl`` listening on 127.0.0.1 only, on a free port, with its Unix socket in the temp dir,
creates a database, and at the end stops the server and removes the temp dir.

Authentication is ``trust``, and only for the Unix socket in the private temp dir and TCP from
127.0.0.1 (pg_hba.conf has no other line). The superuser is ``postgres``, without a password.
Durability is off (fsync off): the data is thrown away anyway.

PostgreSQL refuses to run as root. When the tests run as root (as in CI), initdb and pg_ctl run
as the ``postgres`` OS user (created by Debian's ``postgresql`` package) through ``runuser``,
and the temp dir is handed to that user. Otherwise they run as the current user.

If the binaries are missing the error says to run ``scripts/ensure_postgres.sh``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["PgServer", "PostgresUnavailableError", "find_pg_bin", "postgres_server"]

HOST = "127.0.0.1"
SUPERUSER = "postgres"
_OS_USER_WHEN_ROOT = "postgres"
_JDBC_JAR = "/usr/share/java/postgresql.jar"
_TOOLS = ("initdb", "pg_ctl", "postgres", "pg_isready", "createdb")
_HINT = "run scripts/ensure_postgres.sh (as root it installs Debian's postgresql package)"


class PostgresUnavailableError(RuntimeError):
    """The PostgreSQL server cannot be found or started."""


@dataclass(frozen=True)
class PgServer:
    host: str
    port: int
    user: str
    database: str
    jdbc_url: str
    jdbc_jar: str | None


def find_pg_bin() -> str:
    """The newest ``/usr/lib/postgresql/*/bin`` with all tools used here, or $LOWWATER_PG_BIN."""
    explicit = os.environ.get("LOWWATER_PG_BIN")

    def version(path: str) -> tuple[int, ...]:
        m = re.search(r"/postgresql/([\d.]+)/bin$", path)
        return tuple(int(p) for p in m.group(1).split(".") if p) if m else ()

    candidates = (
        [explicit]
        if explicit
        else sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    )
    for d in candidates:
        if all(os.access(os.path.join(d, t), os.X_OK) for t in _TOOLS):
            return d
    where = explicit or "/usr/lib/postgresql/*/bin"
    raise PostgresUnavailableError(
        f"PostgreSQL server binaries ({', '.join(_TOOLS)}) not found in {where}: {_HINT}"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class _Runner:
    """Runs the server tools as the current user, or as ``postgres`` when we are root."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.as_user: str | None = None
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam(_OS_USER_WHEN_ROOT)
            except KeyError:
                raise PostgresUnavailableError(
                    f"running as root, but there is no '{_OS_USER_WHEN_ROOT}' OS user to run "
                    f"PostgreSQL as (it refuses to run as root): {_HINT}"
                ) from None
            self.as_user = pw.pw_name
            os.chown(workdir, pw.pw_uid, pw.pw_gid)

    def command(self, argv: Sequence[str]) -> list[str]:
        if self.as_user is None:
            return list(argv)
        if shutil.which("runuser"):
            return ["runuser", "-u", self.as_user, "--", *argv]
        return ["su", "-s", "/bin/sh", self.as_user, "-c", shlex.join(argv)]

    def run(self, argv: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(argv),
            cwd=self.workdir,  # the postgres user may not be allowed into our cwd
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _check(proc: subprocess.CompletedProcess[str], what: str, log: str | None = None) -> None:
    if proc.returncode == 0:
        return
    detail = (proc.stdout + proc.stderr).strip()
    if log and os.path.exists(log):
        with open(log, errors="replace") as f:
            detail += "\n--- server log (tail) ---\n" + "".join(f.readlines()[-30:])
    raise PostgresUnavailableError(f"{what} failed (exit {proc.returncode}):\n{detail}")


def _write_config(datadir: str, port: int, sockdir: str) -> None:
    with open(os.path.join(datadir, "postgresql.conf"), "a") as f:
        f.write(
            "\n# lowwater test server\n"
            f"listen_addresses = '{HOST}'\n"
            f"port = {port}\n"
            f"unix_socket_directories = '{sockdir}'\n"
            "fsync = off\n"
            "synchronous_commit = off\n"
            "full_page_writes = off\n"
            "max_connections = 50\n"
            "shared_buffers = 32MB\n"
            "log_min_messages = warning\n"
        )
    with open(os.path.join(datadir, "pg_hba.conf"), "w") as f:
        f.write(
            "# lowwater test server: trust, loopback and the private socket dir only\n"
            f"local all all trust\nhost all all {HOST}/32 trust\n"
        )


def _wait_ready(bin_dir: str, port: int, deadline: float) -> None:
    isready = [os.path.join(bin_dir, "pg_isready"), "-q", "-h", HOST, "-p", str(port)]
    isready += ["-U", SUPERUSER, "-d", "postgres"]
    while True:
        if subprocess.run(isready, check=False, timeout=30).returncode == 0:
            return
        if time.monotonic() > deadline:
            raise PostgresUnavailableError(f"PostgreSQL on {HOST}:{port} never became ready")
        time.sleep(0.1)


def _kill_leftover(datadir: str) -> None:
    """Last resort if pg_ctl stop failed: SIGQUIT the postmaster named in postmaster.pid."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(os.path.join(datadir, "postmaster.pid")) as f:
            pid = int(f.readline().strip())
        os.kill(pid, signal.SIGQUIT)
        for _ in range(50):
            os.kill(pid, 0)  # raises once the process is gone
            time.sleep(0.1)


@contextlib.contextmanager
def postgres_server(database: str = "lowwater_test", timeout: float = 60) -> Iterator[PgServer]:
    """Start a fresh PostgreSQL server; yield how to reach it; stop it and delete its files."""
    bin_dir = find_pg_bin()
    tool = {t: os.path.join(bin_dir, t) for t in _TOOLS}
    workdir = tempfile.mkdtemp(prefix="lowwater-pg-")
    datadir = os.path.join(workdir, "data")
    log = os.path.join(workdir, "server.log")
    started = False
    try:
        runner = _Runner(workdir)
        _check(
            runner.run(
                [
                    tool["initdb"],
                    "-D",
                    datadir,
                    "-U",
                    SUPERUSER,
                    "--auth=trust",
                    "--no-locale",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            "initdb",
        )
        deadline = time.monotonic() + timeout
        for attempt in range(3):  # the free port may be taken between probing and binding
            port = _free_port()
            _write_config(datadir, port, workdir)  # later settings in the file win
            proc = runner.run(
                [tool["pg_ctl"], "-D", datadir, "-l", log, "-w", "-t", str(int(timeout)), "start"],
                timeout=timeout + 10,
            )
            if proc.returncode == 0:
                started = True
                break
            if attempt == 2:
                _check(proc, "pg_ctl start", log)
        _wait_ready(bin_dir, port, deadline)
        _check(
            subprocess.run(
                [tool["createdb"], "-h", HOST, "-p", str(port), "-U", SUPERUSER, database],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            ),
            "createdb",
        )
        jar = _JDBC_JAR if os.path.isfile(_JDBC_JAR) else None
        yield PgServer(
            host=HOST,
            port=port,
            user=SUPERUSER,
            database=database,
            jdbc_url=f"jdbc:postgresql://{HOST}:{port}/{database}",
            jdbc_jar=jar,
        )
    finally:
        if started:
            stop = runner.run([tool["pg_ctl"], "-D", datadir, "-m", "immediate", "-w", "stop"])
            if stop.returncode != 0:
                _kill_leftover(datadir)
        shutil.rmtree(workdir, ignore_errors=True)

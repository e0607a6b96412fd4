"""One run at a time on a checkpoint: a lease under ``<checkpoint>/lowwater/lease.json``.

Spark takes no lock on a streaming checkpoint. A second run started on one in use re-ran the
batch the first had not committed, beside it: lowwater's state, window store, sinks and metrics
line for that batch written again by a run that Spark failed only at its next offset-log write
(``CONCURRENT_STREAM_LOG_UPDATE``), and a batch's files deleted and written again while the first
run could be reading them. Now the run that holds the lease runs, and any other is refused before
it writes anything, naming the holder.

* The holder renews the lease every :data:`RENEW_S` seconds, from a thread of its driver, while
  its query runs, and deletes it when the query ends (a stop, a failure, the end of its input).
* A new run takes a lease that is not there, one its own host's process left behind when it died
  (a SIGKILL, a crash: the process is gone), and one that has not been renewed for
  :data:`STALE_S` seconds. The last it finds out by watching the lease that long, so no two
  hosts' clocks are compared: a driver restarted on another host waits up to that long.
* It refuses a lease whose process is alive on its host, or that is renewed while it watches.
* The fence: a holder whose lease another run took (it was not renewed for :data:`STALE_S`, a
  driver paused that long) finds that at its next renewal, and its next batch fails before it
  writes anything.

Two runs started within a moment of each other can both write the lease; the second write wins,
and the first run's next renewal finds the lease is not its own. What that run did in the
meantime is what Spark's offset log refuses.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

from lowwater.core.errors import ConfigurationError, PipelineError
from lowwater.spark.fs import CheckpointFS, join

__all__ = ["RENEW_S", "STALE_S", "CheckpointLease", "Holder", "decide"]

log = logging.getLogger(__name__)

RENEW_S = 5.0
"""How often the holder renews its lease."""

STALE_S = 30.0
"""How long a lease from another host must go unrenewed before a new run takes it: six renewals."""

_held: dict[str, CheckpointLease] = {}
"""This process's leases, by file: a lease naming this process is its own only if listed here."""
_held_lock = threading.Lock()


@atexit.register
def _release_at_exit() -> None:
    """A process that exits holding leases releases them: its queries end with it. (A run stopped by a
    SIGTERM to its process group lost Spark's JVM first, and its stop failed before the release.)"""
    with _held_lock:
        held = list(_held.values())
    for lease in held:
        lease.release()


@dataclass(frozen=True)
class Holder:
    run: str
    host: str
    pid: int
    pid_start: str | None
    """The process's start time (``/proc/<pid>/stat``), so that a reused pid is not taken for it."""
    started_ms: int
    renewals: int = 0

    def said(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started_ms / 1000))
        return f"run {self.run} (host {self.host}, pid {self.pid}, started {started})"


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot, or ``None`` where there is no
    ``/proc`` (then the pid alone is compared)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def alive(holder: Holder) -> bool:
    """Whether ``holder``'s process (on this host) is still running."""
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return holder.pid_start is None or process_start(holder.pid) in (None, holder.pid_start)


Decision = Literal["take", "refuse", "watch"]


def decide(found: Holder | None, host: str, pid: int, is_alive: Callable[[Holder], bool],
           held_here: Callable[[], bool]) -> Decision:
    """What a new run on ``host`` (process ``pid``) does about the lease it ``found``: take it,
    refuse to run, or watch it for :data:`STALE_S` (another host's: renewed or not)."""
    if found is None:
        return "take"
    if found.host != host:
        return "watch"
    if found.pid == pid:  # this process: its own while one of its queries holds it
        return "refuse" if held_here() else "take"
    return "refuse" if is_alive(found) else "take"


class CheckpointLease:
    """The lease of one run on the checkpoint whose ``lowwater/`` directory is ``location``."""

    def __init__(self, fs: CheckpointFS, location: str, checkpoint: str) -> None:
        self.fs = fs
        self.path = join(location, "lease.json")
        self.checkpoint = checkpoint
        pid = os.getpid()
        self.me = Holder(uuid.uuid4().hex[:12], socket.gethostname(), pid, process_start(pid), int(time.time() * 1000))
        self.lost: Holder | None = None
        """The run that took this run's lease, once a renewal has found it."""
        self._active: Callable[[], bool] = lambda: True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> Holder | None:
        data = self.fs.read(self.path)
        if data is None:
            return None
        try:
            return Holder(**json.loads(data))
        except (ValueError, TypeError):  # torn or not ours: nothing holds it
            return None

    def _write(self, holder: Holder) -> None:
        self.fs.write_atomic(self.path, json.dumps(asdict(holder), sort_keys=True).encode())

    def _refuse(self, holder: Holder, why: str) -> ConfigurationError:
        return ConfigurationError(
            "checkpoint_location",
            f"{self.checkpoint} is in use by {holder.said()}, {why}; one run at a time may run on a checkpoint. "
            f"Stop that run first (a run that died frees it: at once on its own host, after {STALE_S:.0f} s "
            "without renewal on another), or give this one a new checkpoint location")

    def acquire(self, watch_s: float = STALE_S) -> None:
        """Take the lease (:func:`decide`), or raise a :class:`ConfigurationError` naming its holder."""
        found = self._read()
        with _held_lock:
            here = _held.get(self.path)
        decision = decide(found, self.me.host, self.me.pid, alive, lambda: here is not None and here._active())
        if decision == "refuse":
            assert found is not None
            raise self._refuse(found, "whose process is running" if found.pid != self.me.pid
                               else "a query of this process")
        if decision == "watch":
            assert found is not None
            log.warning("%s is leased by %s on another host; taking it if it is not renewed within %.0f s",
                        self.checkpoint, found.said(), watch_s)
            deadline = time.monotonic() + watch_s
            while time.monotonic() < deadline:
                time.sleep(min(RENEW_S / 2, max(0.0, deadline - time.monotonic())))
                now = self._read()
                if now is None:
                    break
                if now != found:
                    raise self._refuse(now, "which renewed it while this run waited")
        if here is not None:
            here.release(delete=False)
        self._write(self.me)
        with _held_lock:
            _held[self.path] = self

    def hold(self, active: Callable[[], bool]) -> None:
        """Renew the lease every :data:`RENEW_S` seconds while ``active()``, then release it."""
        self._active = active
        self._thread = threading.Thread(target=self._renew, name=f"lowwater lease {self.me.run}", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        renewals = 0
        while not self._stop.wait(RENEW_S):
            try:
                if not self._active():
                    self.release()
                    return
                found = self._read()
                if found is not None and found.run != self.me.run:
                    self.lost = found
                    log.error("%s was taken over by %s; this run stops at its next batch", self.checkpoint,
                              found.said())
                    return
                renewals += 1
                self._write(Holder(**{**asdict(self.me), "renewals": renewals}))
            except Exception as e:  # the JVM gone at exit, a file system's hiccup: the next renewal tries again
                if self._stop.is_set():
                    return
                log.debug("renewing the lease of %s failed: %s", self.checkpoint, e)

    def check(self) -> None:
        """The fence: raise before a batch writes anything once another run has taken the lease."""
        if self.lost is not None:
            raise PipelineError(f"{self.checkpoint} was taken over by {self.lost.said()}: this run's lease was not "
                                f"renewed for {STALE_S:.0f} s (its driver paused or cut off), so it stops here "
                                "without writing the batch")

    def release(self, delete: bool = True) -> None:
        """Stop renewing; delete the lease if it is still this run's."""
        self._stop.set()
        with _held_lock:
            if _held.get(self.path) is self:
                del _held[self.path]
        if not delete or self.lost is not None:
            return
        try:
            found = self._read()
            if found is not None and found.run == self.me.run:
                self.fs.delete(self.path)
        except Exception as e:  # at exit, with the JVM gone: the next run finds this process dead
            log.debug("releasing the lease of %s failed: %s", self.checkpoint, e)


"""Which failures of a batch are its query's stop (lowwater.spark.engine._interruption), and signals that
ask a run to stop (lowwater.spark.engine.signals_caught)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class _Java:
    """A Java exception as py4j hands one over: its class's name, its message and its cause."""

    name: str
    message: str = ""
    cause: Any = None

    def getClass(self) -> Any:
        return self

    def getName(self) -> str:
        return self.name

    def getMessage(self) -> str:
        return self.message

    def getCause(self) -> Any:
        return self.cause


def _error(java: _Java) -> Exception:
    e = Exception("An error occurred while calling o123.save")
    e.java_exception = java  # type: ignore[attr-defined]
    return e


def test_a_job_the_stop_cancelled_is_an_interruption_as_spark_reads_one() -> None:
    """The batch's write job cancelled by the stop has no interrupted cause: it was re-raised as the
    long Py4JJavaError, and Spark's stream thread died of a StackOverflowError reading it (seen in CI
    in session 38, after session 37's fix for the interrupted case)."""
    from lowwater.spark.engine import _interruption

    cancelled = _Java("org.apache.spark.SparkException", "[SPARK_JOB_CANCELLED] Job 1080 cancelled Query "
                      "lowwater_job [id = 7, runId = 1] was stopped SQLSTATE: XXKDA")
    assert _interruption(_error(cancelled)) == "java.lang.InterruptedException"
    interrupted = _Java("org.apache.spark.SparkException", "Task failed",
                        _Java("java.io.InterruptedIOException", "", _Java("java.lang.InterruptedException")))
    assert _interruption(_error(interrupted)) == "java.io.InterruptedIOException"
    failed = _Java("org.apache.spark.SparkException", "Job aborted", _Java("java.lang.ArithmeticException"))
    assert _interruption(_error(failed)) is None
    assert _interruption(_error(_Java("org.apache.spark.SparkException", "Job aborted"))) is None
    assert _interruption(Exception("no Java behind it")) is None


_SECOND_SIGNAL = r'''
import os, signal, sys, threading
from lowwater.spark.engine import signals_caught

class Recording(threading.Event):
    """An Event whose first set() is interrupted by a second SIGINT while it holds the event's lock."""

    def set(self) -> None:
        with self._cond:
            if not getattr(self, "sent", False):
                self.sent = True
                os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, while the first is recorded
                for _ in range(10_000):  # bytecode boundaries, where Python runs a signal handler
                    pass
            self._flag = True
            self._cond.notify_all()

received = []
event = Recording()
with signals_caught((signal.SIGINT,), received, event):
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(10_000):
        pass
print(received, event.is_set())
'''


def test_a_second_signal_while_the_first_is_recorded_does_not_hang_the_run() -> None:
    """``lowwater run`` under ``timeout -s INT 30`` never stopped: ``timeout`` signals the process and then
    its group, the second SIGINT's handler came while the first one's ``Event.set`` held the event's
    lock, and waited for it forever in the main thread, so the run went on, deaf to SIGTERM too. Ctrl-C
    pressed twice can do the same. Run in a child process, which hangs without the fix."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _SECOND_SIGNAL], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[2, 2] True"

"""Python objects in the checkpoint, sealed: serialized explicitly and refused when tampered with.

Most of lowwater's checkpoint is plain data (JSON control plane, Parquet window state). Some
state is a user's Python object: the elements in a general-path window, a user
``AggregateFunction``'s accumulator, a process function's keyed state. Those are serialized
with cloudpickle, which can describe any object but must never be *loaded* from a file
someone else could have written: unpickling runs code.

So every such file is sealed: ``MAGIC``, then an HMAC-SHA256 of the payload under a secret
key, then the payload. :func:`unseal` checks the MAC (in constant time) before it unpickles
anything, and refuses a file whose MAC does not match with :class:`CheckpointIntegrityError`.
Someone who can write the checkpoint but does not hold the key cannot make lowwater run
their code.

The key, in this order:

1. the environment variable ``LOWWATER_STATE_KEY``;
2. the Spark configuration ``spark.lowwater.stateKey`` (set it with ``--conf`` on a cluster
   whose driver may restart on another machine, from your secret store);
3. ``~/.lowwater/state.key``: 32 random bytes, created (mode 600, directory 700) on first use.

The key never goes into the checkpoint. A checkpoint sealed under one key is refused under
another; the error says which source the key came from.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import threading
import weakref
from pathlib import Path
from typing import Any

from lowwater.core.errors import ConfigurationError

__all__ = ["MAGIC", "CheckpointIntegrityError", "StateKey", "dumps", "seal", "state_key", "unseal"]

MAGIC = b"LWSEAL1\n"
_MAC_BYTES = 32
ENV_VAR = "LOWWATER_STATE_KEY"
SPARK_CONF = "spark.lowwater.stateKey"


class CheckpointIntegrityError(ConfigurationError):
    """A sealed checkpoint file whose integrity check failed: it was changed, truncated, or sealed
    under another key. Nothing in it was loaded."""

    def __init__(self, message: str) -> None:
        super().__init__("checkpoint_location", message)


class StateKey:
    """The secret that seals checkpoint files, and where it came from (for error messages)."""

    __slots__ = ("origin", "secret")

    def __init__(self, secret: bytes, origin: str) -> None:
        if len(secret) < 16:
            raise ConfigurationError("state key", f"the key from {origin} is {len(secret)} bytes; use at least 16")
        self.secret = secret
        self.origin = origin

    def __repr__(self) -> str:  # never the secret
        return f"StateKey(from {self.origin})"

    def __reduce__(self) -> Any:  # shipped to executors inside a closure: it carries the secret, not its file
        return (StateKey, (self.secret, self.origin))


_lock = threading.Lock()
_home_key: StateKey | None = None


def _home_file() -> Path:
    return Path(os.environ.get("LOWWATER_HOME") or Path.home() / ".lowwater") / "state.key"


def state_key(spark: Any = None) -> StateKey:
    """The key that seals this process's checkpoint files (see the module docstring)."""
    global _home_key
    env = os.environ.get(ENV_VAR)
    if env:
        return StateKey(env.encode(), f"${ENV_VAR}")
    if spark is not None:
        conf = spark.conf.get(SPARK_CONF, None)
        if conf:
            return StateKey(str(conf).encode(), f"the Spark conf {SPARK_CONF}")
    with _lock:
        path = _home_file()
        if _home_key is not None and _home_key.origin == str(path):
            return _home_key
        if not path.exists():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(os.urandom(32).hex())
            try:
                os.link(tmp, path)  # first writer wins; a concurrent one reads the winner's key
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
        _home_key = StateKey(path.read_text().strip().encode(), str(path))
        return _home_key


def _mac(key: StateKey, payload: bytes) -> bytes:
    return hmac.new(key.secret, payload, hashlib.sha256).digest()


def dumps(obj: Any) -> bytes:
    """``obj`` as bytes that ``pickle.loads`` reads in another process: plain pickle (several
    times faster) for what it can describe by reference, cloudpickle for the rest (classes and
    functions defined in ``__main__`` or inside a function, which another process cannot import)."""
    try:
        data = pickle.dumps(obj, protocol=5)
        if b"__main__" not in data:  # a reference to the driver's script, which an executor cannot import
            return data
    except (pickle.PicklingError, AttributeError, TypeError):
        pass
    from pyspark import cloudpickle

    return bytes(cloudpickle.dumps(obj, protocol=5))  # type: ignore[no-untyped-call]


def loads(payload: bytes) -> Any:
    """``payload`` (:func:`dumps`) unpickled without touching this process's own classes.

    cloudpickle keeps a class defined in ``__main__`` (pickled by value) as one class per process:
    unpickling it where it was pickled from finds the live class and sets the pickled copy's
    methods on it, with a copy of their module's globals. So a restart in the same process (a
    notebook, a driver that runs its job again) put the checkpoint's window function back in place
    of the one the user had fixed, and changed the user's own class outside lowwater too (a user
    probe, session 58). Here a class is new unless this load made it, as in a new process."""
    from pyspark.cloudpickle import cloudpickle as cp

    saved = cp._DYNAMIC_CLASS_TRACKER_BY_ID, cp._DYNAMIC_CLASS_TRACKER_BY_CLASS
    cp._DYNAMIC_CLASS_TRACKER_BY_ID, cp._DYNAMIC_CLASS_TRACKER_BY_CLASS = weakref.WeakValueDictionary(), \
        weakref.WeakKeyDictionary()
    try:
        return pickle.loads(payload)
    finally:
        cp._DYNAMIC_CLASS_TRACKER_BY_ID, cp._DYNAMIC_CLASS_TRACKER_BY_CLASS = saved


def seal(obj: Any, key: StateKey) -> bytes:
    """``obj`` serialized (:func:`dumps`: state can hold user classes) and sealed under ``key``."""
    payload = dumps(obj)
    return MAGIC + _mac(key, payload) + payload


def unseal(data: bytes, key: StateKey, what: str) -> Any:
    """The object :func:`seal` sealed in ``data``; :class:`CheckpointIntegrityError` when ``data``
    is not sealed, or not under ``key``. ``what`` names the file in the message."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _MAC_BYTES:
        raise CheckpointIntegrityError(
            f"{what} is not a sealed lowwater state file (it may have been replaced, or written by an older lowwater "
            "version); it was not loaded. Restore the checkpoint from a trusted copy, or start over "
            "with a new checkpoint location")
    mac = data[len(MAGIC):len(MAGIC) + _MAC_BYTES]
    payload = data[len(MAGIC) + _MAC_BYTES:]
    if not hmac.compare_digest(mac, _mac(key, payload)):
        raise CheckpointIntegrityError(
            f"{what} failed its integrity check under the state key from {key.origin}: it was changed after "
            f"lowwater wrote it, or sealed under another key (set ${ENV_VAR} or --conf {SPARK_CONF} to the key "
            "the job was started with). Nothing in it was loaded")
    return loads(payload)

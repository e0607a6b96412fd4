"""The general path's state files are sealed: a tampered checkpoint runs no code (reliability issue 10.12)."""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import pytest

from lowwater.spark.sealed import MAGIC, CheckpointIntegrityError, StateKey, seal, state_key, unseal
from lowwater.spark.state import StateStore

KEY = StateKey(b"k" * 32, "the test")


class _Payload:
    """Unpickling this creates a file: the proof that a loader ran code from the checkpoint."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def test_a_sealed_object_round_trips_and_user_classes_survive() -> None:
    state = {"windows": {("a", 0): [1, 2, 3]}, "acc": _Acc(7)}
    back = unseal(seal(state, KEY), KEY, "x")
    assert back["windows"] == {("a", 0): [1, 2, 3]} and back["acc"].total == 7


class _Acc:
    def __init__(self, total: int) -> None:
        self.total = total


def test_unsealing_in_the_process_that_sealed_leaves_its_own_classes_as_they_are() -> None:
    """A class that cloudpickle takes by value (defined in ``__main__``, here in a function) was one
    class per process: unsealing a checkpoint where it was sealed set the sealed copy's attributes
    and methods on the live class, so a general-path restart in the same process (a notebook) ran
    the checkpoint's window function in place of the fixed one, and the user's own class changed
    (a user probe, session 58)."""
    class Scaled:
        factor = 1

        def scale(self, v: int) -> int:
            return v * self.factor

    sealed = seal({"function": Scaled()}, KEY)
    Scaled.factor = 10  # the user's fix between the runs
    back = unseal(sealed, KEY, "x")
    assert Scaled.factor == 10 and Scaled().scale(2) == 20, "the live class is the user's, as fixed"
    assert back["function"].scale(2) == 2 and type(back["function"]) is not Scaled, "the sealed copy, apart"


@pytest.mark.parametrize("how", ["raw pickle", "payload swapped", "other key", "truncated"])
def test_a_tampered_file_is_refused_before_anything_is_unpickled(tmp_path: Path, how: str) -> None:
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Payload(marker))
    good = seal({"n": 1}, KEY)
    data = {
        "raw pickle": evil,
        "payload swapped": good[: len(MAGIC) + 32] + evil,
        "other key": seal(_Payload(marker), StateKey(b"x" * 32, "an attacker")),
        "truncated": good[: len(MAGIC) + 10],
    }[how]
    assert not marker.exists()
    with pytest.raises(CheckpointIntegrityError, match=r"ck/3\.snap") as e:
        unseal(data, KEY, "ck/3.snap")
    assert not marker.exists(), "the loader ran code from a tampered file"
    assert "k" * 32 not in str(e.value), "the key must never appear in a message"


def test_the_state_store_refuses_a_replaced_snapshot_and_a_replaced_delta(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    store = StateStore(tmp_path / "ck", snapshot_every=2)
    store._key = KEY
    store.commit(0, {"n": 0}, None)
    store.commit(1, None, {"n": 1})
    assert store.load(1, dict, lambda s, d: {**s, **d}) == {"n": 1}
    state_dir = tmp_path / "ck" / "lowwater" / "state"
    mode = stat.S_IMODE((state_dir / "0.snap").stat().st_mode)
    assert mode == 0o600, f"state files are owner-only, got {oct(mode)}"
    for name in ("1.delta", "0.snap"):
        (state_dir / name).write_bytes(pickle.dumps(_Payload(marker)))
        with pytest.raises(CheckpointIntegrityError, match=name):
            store.load(1, dict, lambda s, d: {**s, **d})
        assert not marker.exists()


def test_the_key_comes_from_the_environment_then_a_private_file(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOWWATER_STATE_KEY", raising=False)
    monkeypatch.setenv("LOWWATER_HOME", str(tmp_path / "home"))
    first = state_key()
    key_file = tmp_path / "home" / "state.key"
    assert key_file.exists() and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert state_key().secret == first.secret, "the same key on every call"
    assert first.origin == str(key_file) and str(key_file) in repr(first) and first.secret.decode() not in repr(first)
    monkeypatch.setenv("LOWWATER_STATE_KEY", "an explicit key, long enough")
    assert state_key().secret == b"an explicit key, long enough"
    monkeypatch.setenv("LOWWATER_STATE_KEY", "short")
    with pytest.raises(Exception, match="at least 16"):
        state_key()
    assert os.environ["LOWWATER_HOME"]  # (monkeypatch restores the environment)

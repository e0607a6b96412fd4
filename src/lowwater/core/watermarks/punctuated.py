"""Punctuated watermarks: a watermark decided per element."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from lowwater.core.time import epoch_millis
from lowwater.core.watermarks.generator import WatermarkGenerator
from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput

__all__ = ["PunctuatedWatermarks"]

T = TypeVar("T")


class PunctuatedWatermarks(WatermarkGenerator[T], Generic[T]):
    """Calls ``check(element, extracted_timestamp)`` after every element.

    A non-``None`` result is emitted as a watermark (outputs drop one that is not above
    the last). Nothing happens at periodic emits.

    >>> from lowwater.core.watermarks.recording import RecordingOutput
    >>> g = PunctuatedWatermarks(lambda e, ts: ts if e == "marker" else None)
    >>> out = RecordingOutput(); g.on_event("x", 5, out); g.on_event("marker", 7, out)
    >>> out.watermarks
    [7]
    """

    def __init__(self, check: Callable[[T, int], int | None]) -> None:
        self.check = check

    def on_event(self, event: T, event_timestamp: int, output: WatermarkOutput) -> None:
        wm = self.check(event, event_timestamp)
        if wm is not None:
            output.emit_watermark(Watermark(self._time(wm)))

    def _time(self, wm: object) -> int:
        """What ``check`` returned, as a watermark's time: an integer in the 64-bit range, or a finite
        float truncated toward zero (as a timestamp assigner's is). It was taken with ``int()``: the
        text ``"25000"`` was a watermark and sent the next on-time elements to the late output, and
        ``2**63`` reached the checkpoint, where every later batch failed (a user probe, session 64)."""
        if isinstance(wm, Watermark):
            wm = wm.timestamp
        try:
            return epoch_millis(wm)
        except TypeError:
            raise TypeError(f"the punctuated watermark function {_name(self.check)} returned {wm!r}: a watermark "
                            "is an int of epoch milliseconds (or None for no watermark)") from None
        except ValueError:
            raise ValueError(f"the punctuated watermark function {_name(self.check)} returned {wm!r}: a watermark "
                             "is epoch milliseconds in the signed 64-bit range") from None

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        pass


def _name(fn: object) -> str:
    return repr(getattr(fn, "__qualname__", None) or fn)

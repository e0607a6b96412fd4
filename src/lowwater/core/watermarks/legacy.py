"""Flink's classic (pre-1.11) assigner API, with the seeds' exact formulas.

* :class:`AssignerWithPeriodicWatermarks` and :class:`AssignerWithPunctuatedWatermarks`
  are the classic interfaces; :func:`legacy_watermarks` adapts either to a
  :class:`WatermarkGenerator`.
* :class:`AscendingTimestampExtractor`: watermark ``current_ts - 1`` (``MIN`` before data);
  a timestamp that goes backwards goes to a :class:`MonotonyViolationHandler`.
* :class:`BoundedOutOfOrdernessTimestampExtractor`: watermark ``max_ts - B`` (no ``- 1``),
  never regressing.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Generic, TypeVar

from lowwater.core.errors import ConfigurationError, MonotonyViolationError
from lowwater.core.time import MIN_TIMESTAMP
from lowwater.core.watermarks.assigner import TimestampAssigner
from lowwater.core.watermarks.generator import WatermarkGenerator
from lowwater.core.watermarks.watermark import Watermark, WatermarkOutput

__all__ = [
    "AscendingTimestampExtractor",
    "AssignerWithPeriodicWatermarks",
    "AssignerWithPunctuatedWatermarks",
    "BoundedOutOfOrdernessTimestampExtractor",
    "FailingHandler",
    "IgnoringHandler",
    "LoggingHandler",
    "MonotonyViolationHandler",
    "legacy_watermarks",
]

T = TypeVar("T")
log = logging.getLogger("lowwater.watermarks")


def _as_watermark(value: Watermark | int | None) -> Watermark | None:
    if value is None or isinstance(value, Watermark):
        return value
    return Watermark(int(value))


class AssignerWithPeriodicWatermarks(TimestampAssigner[T], Generic[T]):
    """Classic periodic assigner: ``get_current_watermark()`` runs at every periodic emit."""

    @abstractmethod
    def get_current_watermark(self) -> Watermark | int | None: ...


class AssignerWithPunctuatedWatermarks(TimestampAssigner[T], Generic[T]):
    """Classic punctuated assigner: ``check_and_get_next_watermark`` runs after every element."""

    @abstractmethod
    def check_and_get_next_watermark(
        self, last_element: T, extracted_timestamp: int
    ) -> Watermark | int | None: ...


class _PeriodicAdapter(WatermarkGenerator[T]):
    def __init__(self, assigner: AssignerWithPeriodicWatermarks[T]) -> None:
        self.assigner = assigner

    def on_event(self, event: T, event_timestamp: int, output: WatermarkOutput) -> None:
        pass

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        wm = _as_watermark(self.assigner.get_current_watermark())
        if wm is not None:
            output.emit_watermark(wm)


class _PunctuatedAdapter(WatermarkGenerator[T]):
    def __init__(self, assigner: AssignerWithPunctuatedWatermarks[T]) -> None:
        self.assigner = assigner

    def on_event(self, event: T, event_timestamp: int, output: WatermarkOutput) -> None:
        wm = _as_watermark(self.assigner.check_and_get_next_watermark(event, event_timestamp))
        if wm is not None:
            output.emit_watermark(wm)

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        pass


def legacy_watermarks(
    assigner: AssignerWithPeriodicWatermarks[T] | AssignerWithPunctuatedWatermarks[T],
) -> WatermarkGenerator[T]:
    """The generator view of a classic assigner (the same object supplies timestamps)."""
    if isinstance(assigner, AssignerWithPeriodicWatermarks):
        return _PeriodicAdapter(assigner)
    if isinstance(assigner, AssignerWithPunctuatedWatermarks):
        return _PunctuatedAdapter(assigner)
    raise ConfigurationError(
        "assigner",
        f"expected AssignerWithPeriodicWatermarks or AssignerWithPunctuatedWatermarks, "
        f"got {type(assigner).__name__}",
    )


# -- monotony violation handlers ------------------------------------------------------
class MonotonyViolationHandler(ABC):
    """What an :class:`AscendingTimestampExtractor` does when a timestamp goes backwards."""

    @abstractmethod
    def handle_violation(self, element_timestamp: int, last_timestamp: int) -> None: ...


class IgnoringHandler(MonotonyViolationHandler):
    """Does nothing."""

    def handle_violation(self, element_timestamp: int, last_timestamp: int) -> None:
        pass


class FailingHandler(MonotonyViolationHandler):
    """Raises :class:`MonotonyViolationError` naming both timestamps; the job fails."""

    def handle_violation(self, element_timestamp: int, last_timestamp: int) -> None:
        raise MonotonyViolationError(element_timestamp, last_timestamp)


class LoggingHandler(MonotonyViolationHandler):
    """Logs a warning (the default) and counts violations."""

    def __init__(self) -> None:
        self.violations = 0

    def handle_violation(self, element_timestamp: int, last_timestamp: int) -> None:
        self.violations += 1
        log.warning("Timestamp monotony violated: %d < %d", element_timestamp, last_timestamp)


_HANDLERS: dict[str, Callable[[], MonotonyViolationHandler]] = {
    "ignore": IgnoringHandler,
    "fail": FailingHandler,
    "log": LoggingHandler,
}


def monotony_violation_handler(name: str) -> MonotonyViolationHandler:
    """``"ignore"``, ``"fail"`` or ``"log"``."""
    try:
        return _HANDLERS[name]()
    except KeyError:
        raise ConfigurationError(
            "violation_handler", f"unknown handler {name!r}; use one of {sorted(_HANDLERS)}"
        ) from None


# -- the classic extractors -----------------------------------------------------------
class AscendingTimestampExtractor(AssignerWithPeriodicWatermarks[T], Generic[T]):
    """Timestamps that only go up. Watermark ``current_ts - 1``, or ``MIN`` before data.

    Give the extraction as ``extract`` or override :meth:`extract_ascending_timestamp`.
    A timestamp below the current one is passed to the handler (logging by default) and
    still assigned to its element; the watermark does not move back.
    """

    def __init__(
        self,
        extract: Callable[[T], int] | None = None,
        violation_handler: MonotonyViolationHandler | None = None,
    ) -> None:
        self._extract = extract
        self.current_timestamp = MIN_TIMESTAMP
        self.violation_handler: MonotonyViolationHandler = violation_handler or LoggingHandler()

    def extract_ascending_timestamp(self, element: T) -> int:
        if self._extract is None:
            raise NotImplementedError(
                "pass extract= to AscendingTimestampExtractor or override extract_ascending_timestamp"
            )
        return self._extract(element)

    def extract_timestamp(self, element: T, previous_element_timestamp: int) -> int:
        new_timestamp = self.extract_ascending_timestamp(element)
        if new_timestamp >= self.current_timestamp:
            self.current_timestamp = new_timestamp
        else:
            self.violation_handler.handle_violation(new_timestamp, self.current_timestamp)
        return new_timestamp

    def get_current_watermark(self) -> Watermark:
        if self.current_timestamp == MIN_TIMESTAMP:
            return Watermark(MIN_TIMESTAMP)
        return Watermark(self.current_timestamp - 1)


class BoundedOutOfOrdernessTimestampExtractor(AssignerWithPeriodicWatermarks[T], Generic[T]):
    """Watermark ``max_ts - B``; the last emitted value is kept, so it never regresses.

    A negative ``B`` is rejected. Give the extraction as ``extract`` or override
    :meth:`extract_timestamp_of`.
    """

    def __init__(self, max_out_of_orderness_ms: int, extract: Callable[[T], int] | None = None) -> None:
        if max_out_of_orderness_ms < 0:
            raise ConfigurationError(
                "max_out_of_orderness",
                f"Tried to set the maximum allowed lateness to {max_out_of_orderness_ms} ms. "
                "This parameter cannot be negative.",
            )
        self.max_out_of_orderness_ms = max_out_of_orderness_ms
        self._extract = extract
        self.current_max_timestamp = MIN_TIMESTAMP + max_out_of_orderness_ms
        self.last_emitted_watermark = MIN_TIMESTAMP

    def extract_timestamp_of(self, element: T) -> int:
        if self._extract is None:
            raise NotImplementedError(
                "pass extract= to BoundedOutOfOrdernessTimestampExtractor or override extract_timestamp_of"
            )
        return self._extract(element)

    def extract_timestamp(self, element: T, previous_element_timestamp: int) -> int:
        timestamp = self.extract_timestamp_of(element)
        if timestamp > self.current_max_timestamp:
            self.current_max_timestamp = timestamp
        return timestamp

    def get_current_watermark(self) -> Watermark:
        potential = self.current_max_timestamp - self.max_out_of_orderness_ms
        if potential >= self.last_emitted_watermark:
            self.last_emitted_watermark = potential
        return Watermark(self.last_emitted_watermark)

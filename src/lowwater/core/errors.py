"""One error hierarchy for lowwater. Every message says what to do next."""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterable

__all__ = [
    "BadRecordError",
    "CheckpointDamagedError",
    "ConfigurationError",
    "LowwaterError",
    "MonotonyViolationError",
    "OutputSchemaError",
    "PipelineError",
    "QueryFailedError",
    "UserFunctionError",
    "article",
    "blame",
    "blamed",
    "raised_at",
    "said",
    "shown",
]


def article(type_name: str) -> str:
    """``a`` or ``an`` before a type's name as it is said (``an INT``, ``an INTEGER``, ``a BIGINT``)."""
    return "an" if type_name[:1].upper() in "AEIOU" else "a"


class LowwaterError(Exception):
    """Base class of every error lowwater raises on purpose."""


class ConfigurationError(LowwaterError, ValueError):
    """A parameter is invalid. The message names the parameter and the accepted range."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter


class PipelineError(LowwaterError):
    """The pipeline is wired in a way that cannot run (for example a window without a key)."""


class QueryFailedError(PipelineError):
    """A Spark streaming query failed. The message is the line that names the cause (a user
    function's failure says its record and its line) and a hint where lowwater knows one.

    The failure as Spark raised it, a ``StreamingQueryException`` whose text holds the JVM's and
    the Python workers' traces, is :attr:`query_exception`. It is not chained: Spark's log has
    printed that trace already, and chained it printed about a hundred lines more under the one
    that says what failed."""

    def __init__(self, message: str, query_exception: BaseException) -> None:
        super().__init__(message)
        self.query_exception = query_exception


class OutputSchemaError(PipelineError):
    """An output whose batch gives a column another type than the batches before it gave it:
    a table, or files read together, cannot hold both in one column."""

    def __init__(self, what: str, batch_id: int, field: str, kept: str, got: str,
                 kept_by: str = "earlier batches made it",
                 fix: str = "Return one type for it (float(x) for a number that is sometimes whole)") -> None:
        super().__init__(
            f"{what}: in batch {batch_id} the field {field} holds {got} values, where {kept_by} {article(kept)} "
            f"{kept} column (a sink writes every batch into the same columns). {fix}, then restart: processing "
            f"resumes from the last completed batch.")
        self.field = field

    PLACES = "Give its Decimals no more places than the column's (Decimal.quantize)"
    """The fix where a batch's Decimals have more places than the column keeps (which a parse or cast
    would round)."""


class CheckpointDamagedError(LowwaterError):
    """Files the checkpoint's state names, written by earlier batches and needed now, are gone:
    processing cannot resume without them, and would be wrong if it went on as if they held nothing."""

    def __init__(self, what: str, missing: list[str]) -> None:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        super().__init__(
            f"the checkpoint lost {what}: {len(missing)} director{'y' if len(missing) == 1 else 'ies'} that its "
            f"state names hold{'s' if len(missing) == 1 else ''} no data file ({shown}). Earlier batches wrote files "
            "there, and something deleted them since (a cleaner of old files, a storage lifecycle rule, a person), "
            "or the executors wrote them to disks the driver does not see. Restore them from a copy of the "
            "checkpoint, or run the pipeline from a new checkpoint location")
        self.missing = missing


class BadRecordError(LowwaterError):
    """A record that cannot be processed because of its data, not the pipeline's code: a
    missing key, a missing or non-numeric timestamp, a missing value to aggregate.

    Engines catch it per record and send the record to the dead-letter output with
    ``reason`` and its source position; it is counted in ``rows_dead_lettered``. A user
    function may raise it too, to dead-letter a record on purpose.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    SOURCE_TIMESTAMP = "source timestamp"
    """The field a reason names where the timestamp is the source's (no field assigner)."""

    # The reasons every engine path gives, from one place so that the paths agree.
    @staticmethod
    def missing_timestamp(field: str) -> str:
        return f"missing or non-numeric timestamp ({field})"

    @staticmethod
    def no_timestamp(timestamp: int | None, field: str = SOURCE_TIMESTAMP) -> str:
        """The reason for an element an event-time window cannot take: ``timestamp`` is ``None`` (the
        record had none, and its assigner kept it so) or ``Long.MIN_VALUE``."""
        return BadRecordError.missing_timestamp(field) if timestamp is None else \
            BadRecordError.no_timestamp_marker(field)

    @staticmethod
    def timestamp_origin(origins: Iterable[str | None]) -> str:
        """What a window's reason for a timestamp it cannot take names as where it came from, given
        the origin of each way into the window (:attr:`WatermarkStrategy.timestamp_origin`): the
        source's timestamp (``None``), a Python assigner that returned it, or either.

        >>> BadRecordError.timestamp_origin([None])
        'source timestamp'
        >>> BadRecordError.timestamp_origin(["TimestampAssigner('f')", ""])
        "TimestampAssigner('f') returned it"
        >>> BadRecordError.timestamp_origin([None, "A", "B"])
        'source timestamp, or A or B returned it'
        """
        origins = set(origins)
        names = " or ".join(sorted(o for o in origins if o))
        if not names:
            return BadRecordError.SOURCE_TIMESTAMP
        source = f"{BadRecordError.SOURCE_TIMESTAMP}, or " if None in origins else ""
        return f"{source}{names} returned it"

    @staticmethod
    def out_of_range(field: str, value: object) -> str:
        return f"timestamp out of the 64-bit millisecond range ({field}): {value!r}"

    @staticmethod
    def no_timestamp_marker(field: str) -> str:
        return f"timestamp is Long.MIN_VALUE, Flink's no-timestamp marker ({field})"

    @staticmethod
    def missing(what: str, field: str) -> str:
        return f"missing {what} ({field})"

    @staticmethod
    def non_numeric(field: str, value: object) -> str:
        return f"non-numeric value ({field}): {value!r}"[:200]

    @staticmethod
    def edge_timestamp(timestamp: int, margin_ms: int) -> str:
        return (f"timestamp {timestamp} is within {margin_ms} ms of the 64-bit range's end: its "
                "window or cleanup time cannot be represented")

    @staticmethod
    def unparsed(text: str) -> str:
        return f"record does not parse: {text[:200]!r}"


class MonotonyViolationError(LowwaterError):
    """An ascending-timestamp extractor saw a timestamp go backwards (the failing handler)."""

    def __init__(self, element_timestamp: int, last_timestamp: int) -> None:
        super().__init__(
            f"Ascending timestamps condition violated. Element timestamp {element_timestamp} "
            f"is smaller than last timestamp {last_timestamp}. Use "
            "BoundedOutOfOrdernessTimestampExtractor (or "
            "WatermarkStrategy.for_bounded_out_of_orderness) if the input is out of order, "
            "or choose the ignoring/logging MonotonyViolationHandler."
        )
        self.element_timestamp = element_timestamp
        self.last_timestamp = last_timestamp


class UserFunctionError(LowwaterError):
    """A user function raised. Names the function and, where known, the source position."""

    def __init__(
        self,
        function: str,
        cause: BaseException,
        *,
        partition: object | None = None,
        offset: int | None = None,
    ) -> None:
        where = ""
        if partition is not None:
            where = f" at partition {partition}" + (f", offset {offset}" if offset is not None else "")
        at = raised_at(cause)
        super().__init__(
            f"user function {function} raised {said(cause)}{where}. "
            "Fix the function and restart; processing resumes from the last completed batch."
            + (f" It raised at {at}." if at else "")
        )
        self.function = function
        self.partition = partition
        self.offset = offset


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def raised_at(e: BaseException) -> str | None:
    """Where the user's code raised ``e``, from its traceback: the first frame below lowwater's own,
    which is the user's function that lowwater called, at the line that raised or called what
    raised (``/jobs/clicks.py line 17, in parse``). ``None`` for an exception never raised or
    raised by lowwater alone. On Spark the function ran on an executor, whose traceback the
    driver's error does not show; a function shipped by value keeps the file name it was
    defined in."""
    frames = traceback.extract_tb(e.__traceback__) if e.__traceback__ is not None else []
    ours = [i for i, f in enumerate(frames) if os.path.abspath(f.filename).startswith(_PACKAGE)]
    below = frames[ours[-1] + 1:] if ours else []
    if not below:
        return None
    f = below[0]
    return f"{f.filename} line {f.lineno}, in {f.name}"


def blame(e: BaseException, function: str) -> None:
    """Mark ``e`` as raised by the user's ``function`` (``trigger CountTrigger(3)``) where one
    operator calls several (a window's assigner, trigger and aggregate function): the operator's
    node says which (:func:`blamed`). The innermost mark stands."""
    if getattr(e, "lowwater_function", None) is None:
        # an exception class that takes no attributes: the node's own label stands
        with contextlib.suppress(Exception):
            e.lowwater_function = function  # type: ignore[attr-defined]


def blamed(e: BaseException, default: str) -> str:
    """The function :func:`blame` marked ``e`` with, else ``default``."""
    return getattr(e, "lowwater_function", None) or default


def said(e: BaseException) -> str:
    """An exception as a message quotes it: ``ZeroDivisionError: division by zero``, or its type's
    name alone where it has no text (``KeyboardInterrupt``), or where its ``__str__`` itself
    raises (a user's exception class): the failure it reports must not be lost to that."""
    try:
        text = str(e)
    except Exception:  # its own failure is not the one to report
        text = ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def shown(o: object) -> str:
    """A user object as a message names it: its own repr where its class has one, else its class's
    name (``EveryElementThenEnd``, not ``<__main__.EveryElementThenEnd object at 0x7f...>``; a
    user's subclass of ``CountTrigger`` is its own name, not ``CountTrigger(2)``)."""
    return repr(o) if "__repr__" in vars(type(o)) else type(o).__name__


def not_an_output_tag(tag: object, call: str = "ctx.output", reads: str = "get_side_output(...) reads") -> str:
    """What ``call`` (``ctx.output(tag, value)``, ``get_side_output(tag)``) with something else than an
    ``OutputTag`` is told: a side output is found by its tag, so a name alone reached none, and the
    value was lost without a word (a user probe, session 57). ``reads`` names the tag's other end."""
    hint = f"OutputTag({tag!r})" if isinstance(tag, str) else "an OutputTag"
    return f"{call} takes an OutputTag, got {type(tag).__name__} {tag!r:.60}: pass {hint}, the tag that {reads}"

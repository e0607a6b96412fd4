"""What a user function raised: a dead letter, an error of lowwater's, or a failure that names it.

Every operator calls user functions (maps, key selectors, timestamp assigners, window and
process functions) in a ``try`` whose one ``except`` hands the exception to
:func:`user_code_failed`::

    try:
        out = self.fn(record.value)
    except (Exception, SystemExit) as e:
        user_code_failed(e, f"map {name}", record, on_bad=self.dead.add)
        return  # reached only when the record went to the dead-letter output

- :class:`BadRecordError` (the record's data cannot be processed): given to ``on_bad``
  with the record; then it returns. Without a record to reject (a window function firing a
  whole window, a timer, a generator's periodic emission) it fails the job as any other
  exception does, a :class:`UserFunctionError` naming ``what``.
- another :class:`LowwaterError`: re-raised unchanged (with ``wrap_lowwater``, wrapped like
  any exception: what a key selector raises is its failure, whatever it is).
- any other exception: :class:`UserFunctionError` naming ``what`` and the record's partition
  and offset (or ``partition``), raised from it.

The ``except`` takes ``SystemExit`` too: ``exit()`` or ``sys.exit()`` in a function is its
failure, named with its position, not the end of the driver's Python (which, in Spark's
``foreachBatch`` callback, left the query waiting for an answer for ever). ``KeyboardInterrupt``
is not taken: on the reference runtime it is the user's Ctrl-C.

The ``try`` stays at the call site, not in a context manager: it costs nothing until
something is raised, and operators run it for every record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lowwater.core.errors import BadRecordError, LowwaterError, UserFunctionError
from lowwater.runtime.records import Record

__all__ = ["user_code_failed"]


def user_code_failed(
    e: BaseException, what: str, record: Record | None = None, *,
    on_bad: Callable[[Record, BadRecordError], None] | None = None,
    partition: Any = None, wrap_lowwater: bool = False,
) -> None:
    """Dead-letter ``record`` and return, or raise (see the module)."""
    if isinstance(e, BadRecordError) and on_bad is not None and record is not None:
        on_bad(record, e)
        return
    if isinstance(e, LowwaterError) and not wrap_lowwater and not isinstance(e, BadRecordError):
        raise e
    # a BadRecordError with no record to dead-letter (a window function firing a whole window, a
    # timer): the job fails, naming the function, as for any other error it raises there
    if record is not None:
        raise UserFunctionError(what, e, partition=record.partition, offset=record.offset) from e
    raise UserFunctionError(what, e, partition=partition) from e

"""Accounting: now :mod:`lowwater.metrics.accounting` (below the runtimes); re-exported here."""

from lowwater.metrics.accounting import (
    Accounting,
    AccountingError,
    from_lines,
)

__all__ = [
    "Accounting",
    "AccountingError",
    "from_lines",
]

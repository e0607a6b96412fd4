"""Where every record went: ``rows in = windowed + late + dead-lettered (+ unassigned)``.

Every record a job reads ends in exactly one place: a window (``rows_windowed``: added to
at least one window), the late output (``rows_late``: late for all its windows, counted
whether or not a late sink was given), or the dead-letter output (``rows_dead_lettered``:
its data cannot be processed; the reason and source position go with it). A fourth
place exists only with a user window assigner that gives an element no window and is
not late (``rows_unassigned``; Flink drops those without a trace, lowwater counts them).

Each term is counted where it happens, independently of the others, so the balance is a
check, not a definition. It covers the whole job when the window operator is fed straight
from the sources (``direct``); with a map, filter or flat_map in between (which may drop
or multiply records on purpose), it covers the records reaching the window operator.

A reference run's account is :meth:`lowwater.runtime.result.JobResult.accounting`; this module
knows no runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lowwater.core.errors import LowwaterError
from lowwater.metrics.line import processes

__all__ = ["Accounting", "AccountingError", "from_lines", "operator_lines", "operator_names", "operator_scope"]


class AccountingError(LowwaterError):
    """Records are unaccounted for (a bug: please report it with the metrics log)."""


@dataclass(frozen=True)
class Accounting:
    rows_in: int
    rows_windowed: int
    rows_late: int
    rows_dead_lettered: int
    rows_unassigned: int = 0
    scope: str = "job"
    """``job``: ``rows_in`` counts every record read; ``window operator`` (``process operator``): the
    records reaching it (:func:`operator_scope`)."""
    processed: bool = False
    """The operator is a process function: ``rows_windowed`` counts the elements it processed, and
    the account says ``processed`` where a window's says ``windowed``."""
    missing_batches: tuple[int, ...] = ()
    """Batches the metrics log has no line for (an append that failed): their records are not
    in these totals, so the account cannot be called balanced."""

    @property
    def accounted(self) -> int:
        return self.rows_windowed + self.rows_late + self.rows_dead_lettered + self.rows_unassigned

    @property
    def balanced(self) -> bool:
        return self.rows_in == self.accounted and not self.missing_batches

    def __str__(self) -> str:
        text = (f"{self.rows_in} rows in = {self.rows_windowed} {'processed' if self.processed else 'windowed'} + "
                f"{self.rows_late} late + "
                f"{self.rows_dead_lettered} dead-lettered")
        if self.rows_unassigned:
            text += f" + {self.rows_unassigned} unassigned"
        if self.scope != "job":
            text += f" (at the {self.scope})"
        if self.rows_in != self.accounted:
            text += f"; UNACCOUNTED: {self.rows_in - self.accounted:+d}"
        if self.missing_batches:
            shown = ", ".join(map(str, self.missing_batches[:10])) + (", ..." if len(self.missing_batches) > 10 else "")
            text += (f"; INCOMPLETE: the metrics log has no line for {len(self.missing_batches)} batch(es) ({shown}), "
                     "whose records these totals do not count")
        return text

    def check(self) -> Accounting:
        """``self`` if balanced, else :class:`AccountingError`."""
        if not self.balanced:
            raise AccountingError(f"records unaccounted for: {self}")
        return self


def operator_scope(process: bool) -> str:
    """The scope of an account of the records reaching the operator (a map, filter or flat_map
    before it may drop or add records): a window's, or a process function's, which counts the
    elements it processed where a window counts those it windowed."""
    return "process operator" if process else "window operator"


def from_lines(lines: Iterable[Mapping[str, Any]]) -> Accounting:
    """The accounting of metrics lines (:mod:`lowwater.metrics.log`, one per batch)."""
    lines = list(lines)
    direct = all(bool(x.get("direct", True)) for x in lines)
    processed = processes(lines)
    # the batches each line stands for (a folded line many: metrics.log), and the gaps between them
    spans = sorted((int(x.get("folded_from", x["batch_id"])), int(x["batch_id"]))
                   for x in lines if x.get("batch_id") is not None)
    gaps: list[int] = []
    reached = spans[0][0] - 1 if spans else 0
    for start, end in spans:
        gaps.extend(range(reached + 1, start))
        reached = max(reached, end)
    missing = tuple(gaps)

    def total(key: str) -> int:
        return sum(int(x.get(key) or 0) for x in lines)

    return Accounting(
        rows_in=total("rows_in" if direct else "operator_rows_in"),
        rows_windowed=total("rows_windowed"),
        rows_late=total("rows_late"),
        rows_dead_lettered=total("rows_dead_lettered" if direct else "operator_rows_dead_lettered"),
        rows_unassigned=total("rows_unassigned"),
        scope="job" if direct else operator_scope(processed),
        processed=processed,
        missing_batches=missing,
    )


def operator_names(lines: Iterable[Mapping[str, Any]]) -> list[str]:
    """The window operators named in ``lines``' ``operators`` (a job with several), in order; empty
    for a job with one."""
    return list(dict.fromkeys(name for x in lines for name in (x.get("operators") or {})))


def operator_lines(lines: Iterable[Mapping[str, Any]], name: str) -> list[dict[str, Any]]:
    """The window operator ``name``'s part of each line, as a one-operator job's lines whose records
    reach it through other operators (``direct`` false), so that :func:`from_lines` gives its own
    account. A batch whose line has no entry for it is left out: :func:`from_lines` counts it
    missing, and its account is not called balanced."""
    return [{"batch_id": x["batch_id"], "direct": False, **x["operators"][name],
             **({"folded_from": x["folded_from"]} if x.get("folded_from") is not None else {})}
            for x in lines if name in (x.get("operators") or {})]

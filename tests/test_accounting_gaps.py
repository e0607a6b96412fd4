"""A batch missing from the metrics log makes the account incomplete, never balanced (issue 10.11)."""

from __future__ import annotations

from lowwater.observe.accounting import from_lines


def _line(batch_id: int, rows: int) -> dict[str, object]:
    return {"batch_id": batch_id, "rows_in": rows, "rows_windowed": rows, "rows_late": 0, "rows_dead_lettered": 0}


def test_a_complete_log_balances() -> None:
    accounting = from_lines([_line(0, 400), _line(1, 400), _line(2, 400)])
    assert accounting.balanced and str(accounting) == "1200 rows in = 1200 windowed + 0 late + 0 dead-lettered"


def test_a_log_with_a_missing_batch_is_reported_as_incomplete() -> None:
    accounting = from_lines([_line(0, 400), _line(3, 400), _line(4, 400)])  # 1 and 2 failed to append
    assert not accounting.balanced
    assert accounting.missing_batches == (1, 2)
    assert "INCOMPLETE" in str(accounting) and "2 batch(es) (1, 2)" in str(accounting)
    assert "UNACCOUNTED" not in str(accounting), "each line balances; what is missing is the lines"

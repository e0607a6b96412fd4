"""user_code_failed: what a user function raised becomes a dead letter, passes through, or names the function."""

from __future__ import annotations

import pytest

from lowwater.core.errors import BadRecordError, ConfigurationError, UserFunctionError
from lowwater.runtime.records import Record
from lowwater.runtime.user_code import user_code_failed

RECORD = Record({"v": 1}, 1000, ("src", 2), partition=2, offset=7)


def test_a_bad_record_goes_to_on_bad_and_nothing_is_raised() -> None:
    seen: list[tuple[Record, str]] = []
    user_code_failed(BadRecordError("no key"), "map f", RECORD, on_bad=lambda r, e: seen.append((r, e.reason)))
    assert seen == [(RECORD, "no key")]


def test_a_bad_record_with_no_record_to_reject_fails_naming_the_function() -> None:
    """A window function firing a whole window, a timer: there is no one record to dead-letter."""
    cause = BadRecordError("no key")
    with pytest.raises(UserFunctionError, match="user function window function of w raised BadRecordError: no key") \
            as info:
        user_code_failed(cause, "window function of w")
    assert info.value.__cause__ is cause


def test_any_other_exception_names_the_function_and_the_record_position() -> None:
    cause = KeyError("v")
    with pytest.raises(UserFunctionError) as info:
        user_code_failed(cause, "map parse", RECORD)
    assert str(info.value) == ("user function map parse raised KeyError: 'v' at partition 2, offset 7. "
                               "Fix the function and restart; processing resumes from the last completed batch.")
    assert info.value.__cause__ is cause


def test_a_failure_outside_a_record_names_the_partition_if_given() -> None:
    with pytest.raises(UserFunctionError, match=r"raised ValueError: x at partition 3\. "):
        user_code_failed(ValueError("x"), "watermark generator (g)", partition=3)


def test_lowwater_errors_are_raised_unchanged_unless_wrapped() -> None:
    error = ConfigurationError("x", "y")
    with pytest.raises(ConfigurationError) as info:
        user_code_failed(error, "map f", RECORD)
    assert info.value is error
    with pytest.raises(UserFunctionError, match="user function key_by k raised ConfigurationError"):
        user_code_failed(error, "key_by k", RECORD, wrap_lowwater=True)

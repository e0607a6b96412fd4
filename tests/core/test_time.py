"""Durations are integer milliseconds in the core; the API edge converts everything else once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lowwater.core.errors import ConfigurationError
from lowwater.core.time import MAX_TIMESTAMP, MIN_TIMESTAMP, Duration, to_millis


def test_timestamps_span_the_signed_64_bit_range() -> None:
    assert MIN_TIMESTAMP == -(2**63)
    assert MAX_TIMESTAMP == 2**63 - 1


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("200 ms", 200),
        ("10 seconds", 10_000),
        ("10s", 10_000),
        ("1.5 s", 1_500),
        ("5 min", 300_000),
        ("2 minutes", 120_000),
        ("1 hour", 3_600_000),
        ("1 h", 3_600_000),
        ("1 day", 86_400_000),
        ("750", 750),
        ("  3 SECONDS ", 3_000),
    ],
)
def test_duration_strings_are_read_as_integer_milliseconds(text: str, millis: int) -> None:
    assert to_millis(text) == millis
    assert isinstance(to_millis(text), int)
    assert Duration.parse(text).millis == millis


def test_an_int_is_taken_as_milliseconds_and_a_duration_passes_through() -> None:
    assert to_millis(1234) == 1234
    assert to_millis(Duration(77)) == 77


def test_timedelta_is_converted_exactly() -> None:
    assert to_millis(timedelta(seconds=1, milliseconds=500)) == 1_500
    assert to_millis(timedelta(minutes=-1)) == -60_000
    assert to_millis(timedelta(days=1)) == 86_400_000


def test_duration_constructors_agree_with_their_unit() -> None:
    assert Duration.of_millis(5).millis == 5
    assert Duration.of_seconds(3).millis == 3_000
    assert Duration.of_minutes(2).millis == 120_000
    assert Duration.of_hours(1).millis == 3_600_000
    assert Duration.of_days(2).millis == 172_800_000
    assert Duration.of(timedelta(seconds=2)).millis == 2_000
    assert Duration.of_seconds(90).to_timedelta() == timedelta(seconds=90)


@pytest.mark.parametrize(
    "bad",
    ["10 fortnights", "ten seconds", "", "1 s 2", "1.0005 s"],
)
def test_an_unreadable_duration_string_is_rejected_naming_the_parameter(bad: str) -> None:
    with pytest.raises(ConfigurationError) as e:
        to_millis(bad, name="idleness")
    assert e.value.parameter == "idleness"
    assert "idleness" in str(e.value)


def test_a_timedelta_finer_than_a_millisecond_is_rejected() -> None:
    with pytest.raises(ConfigurationError) as e:
        to_millis(timedelta(microseconds=1_500), name="lag")
    assert e.value.parameter == "lag"


@pytest.mark.parametrize("bad", [True, False, 1.5, None, [1]])
def test_bools_floats_and_other_types_are_not_durations(bad: object) -> None:
    with pytest.raises(ConfigurationError) as e:
        to_millis(bad, name="size")  # type: ignore[arg-type]
    assert e.value.parameter == "size"


def test_configuration_error_is_a_value_error_with_the_parameter_first() -> None:
    err = ConfigurationError("size", "must be > 0")
    assert isinstance(err, ValueError)
    assert str(err).startswith("size:")


@pytest.mark.parametrize("value", ["300000000000 d", 2**63, -(2**63), "٥ s"])
def test_a_duration_beyond_64_bit_milliseconds_or_of_other_digits_is_refused_naming_it(value: object) -> None:
    """A window of ``300000000000 d`` (2.6e19 ms) was accepted, and every record was dead-lettered, each
    with a reason of its own; ``"٥ s"`` (an Arabic-Indic five) was 5 s."""
    with pytest.raises(ConfigurationError, match="size"):
        to_millis(value, name="size")  # type: ignore[arg-type]
    assert to_millis(MAX_TIMESTAMP) == MAX_TIMESTAMP and to_millis("-5 s") == -5000

"""Durations and times as people write them in YAML (optalloc.units)."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optalloc.units import (
    MAX_DURATION_S,
    MAX_TIME_S,
    format_duration,
    parse_duration,
    parse_duration_in_range,
    parse_time,
    parse_time_in_range,
    text_problem,
)

NOW_ISO = "2026-11-29T12:00:00Z"
NOW = dt.datetime(2026, 11, 29, 12, tzinfo=dt.timezone.utc).timestamp()


@pytest.mark.parametrize(
    "text, seconds",
    [
        pytest.param(3600, 3600.0, id="a bare integer is seconds"),
        pytest.param(1.5, 1.5, id="a bare float is seconds"),
        pytest.param("90s", 90.0, id="seconds with a unit"),
        pytest.param("15m", 900.0, id="minutes"),
        pytest.param("15min", 900.0, id="minutes spelled min"),
        pytest.param("8h", 28800.0, id="hours"),
        pytest.param("7d", 604800.0, id="days"),
        pytest.param("2w", 1209600.0, id="weeks"),
        pytest.param("1h30m", 5400.0, id="hours and minutes combined"),
        pytest.param("1d 2h 3m 4s", 93784.0, id="all units with spaces between them"),
        pytest.param("0.5h", 1800.0, id="a fractional amount"),
        pytest.param(" 45 ", 45.0, id="a number as a string is seconds"),
        pytest.param(0, 0.0, id="zero means none"),
    ],
)
def test_parse_duration_accepts_human_forms(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True, id="a boolean is not a duration"),
        pytest.param(-1, id="a negative number"),
        pytest.param("-5m", id="a negative string"),
        pytest.param("5x", id="an unknown unit"),
        pytest.param("1m30", id="a trailing number without a unit after a unit"),
        pytest.param("10ms", id="milliseconds are not a unit"),
        pytest.param("", id="an empty string"),
        pytest.param(float("inf"), id="infinity (YAML .inf)"),
        pytest.param(float("nan"), id="not a number (YAML .nan)"),
        pytest.param(None, id="null"),
        pytest.param([1], id="a list"),
    ],
)
def test_parse_duration_rejects_bad_values_with_a_value_error(value):
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize(
    "value, seconds",
    [
        pytest.param(NOW_ISO, NOW, id="ISO with Z is UTC"),
        pytest.param("2026-11-29T13:00:00+01:00", NOW, id="ISO with an offset"),
        pytest.param("2026-11-29T12:00:00", NOW, id="a naive ISO string is UTC"),
        pytest.param(dt.datetime(2026, 11, 29, 12), NOW, id="a naive datetime is UTC"),
        pytest.param(dt.datetime(2026, 11, 29, 12, tzinfo=dt.timezone.utc), NOW, id="an aware datetime"),
        pytest.param(dt.date(2026, 11, 29), NOW - 12 * 3600, id="a YAML date is midnight UTC"),
        pytest.param("2026-11-29", NOW - 12 * 3600, id="a date string is midnight UTC"),
        pytest.param(120, 120.0, id="a number is seconds"),
        pytest.param("120.5", 120.5, id="a numeric string is seconds"),
    ],
)
def test_parse_time_accepts_seconds_and_iso(value, seconds):
    assert parse_time(value) == seconds


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(False, id="a boolean"),
        pytest.param("yesterday", id="a word"),
        pytest.param("nan", id="the string nan"),
        pytest.param("inf", id="the string inf"),
        pytest.param(float("inf"), id="infinity"),
        pytest.param("2026-13-01", id="month 13"),
    ],
)
def test_parse_time_rejects_bad_values_with_a_value_error(value):
    with pytest.raises(ValueError):
        parse_time(value)


@given(
    d=st.integers(0, 30), h=st.integers(0, 23), m=st.integers(0, 59), s=st.integers(0, 59)
)
def test_a_combined_duration_is_the_sum_of_its_parts(d, h, m, s):
    text = f"{d}d{h}h{m}m{s}s"
    assert parse_duration(text) == d * 86400 + h * 3600 + m * 60 + s


@given(seconds=st.floats(min_value=0, max_value=1e9, allow_nan=False))
def test_format_duration_round_trips_within_its_three_significant_digits(seconds):
    back = parse_duration(format_duration(seconds))
    assert math.isclose(back, seconds, rel_tol=5e-3, abs_tol=5e-3)


@pytest.mark.parametrize(
    "seconds, text",
    [
        pytest.param(7 * 86400, "7d", id="whole days"),
        pytest.param(8 * 3600, "8h", id="whole hours"),
        pytest.param(36 * 3600, "36h", id="hours past a day that are not whole days"),
        pytest.param(300, "5m", id="minutes"),
        pytest.param(45, "45s", id="seconds"),
    ],
)
def test_format_duration_writes_the_largest_clean_unit(seconds, text):
    assert format_duration(seconds) == text


# ---------------------------------------------------------------------- ranges at the door

@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1e20", id="the year 3 billion"),
        pytest.param(-1, id="before 1970"),
        pytest.param("2100-01-01T00:00:01Z", id="just after 2100"),
        pytest.param("nan", id="not a number"),
        pytest.param("inf", id="infinity"),
    ],
)
def test_a_time_outside_1970_to_2100_is_refused_at_the_door(value):
    with pytest.raises(ValueError):
        parse_time_in_range(value)


@given(st.floats(min_value=0, max_value=MAX_TIME_S))
def test_every_time_in_range_passes_the_door_unchanged(t):
    assert parse_time_in_range(t) == t


@given(st.floats(min_value=MAX_DURATION_S, exclude_min=True, allow_infinity=True))
def test_every_duration_beyond_ten_years_is_refused(d):
    with pytest.raises(ValueError):
        parse_duration_in_range(d)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("train-0042", None),
        ("é-ü-名前", None),
        ("job-\udcff", "is not valid UTF-8"),
        ("a\x1b[31m", "contains the control character '\\x1b'"),
        ("line\nbreak", "contains the control character '\\n'"),
        ("x" * 201, "is 201 characters long, more than 200"),
        ("A1\u200b", "contains the invisible format character U+200B (zero width space)"),
        ("evil\u202e1A", "contains the invisible format character U+202E (right-to-left override)"),
        ("\ufeffjob", "contains the invisible format character U+FEFF (zero width no-break space)"),
    ],
)
def test_names_must_be_short_printable_utf8(text, problem):
    assert text_problem(text) == problem

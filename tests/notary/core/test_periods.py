"""Period boundaries and retention ages (issue 33: ``--log-period``, ``--log-retention``): the
boundaries are fixed UTC instants, calendar-aligned, the same whatever instant asks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notary.core.periods import (
    Span,
    age_cutoff,
    next_boundary,
    parse_span,
    period_start,
    span_problem,
)

INSTANTS = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2400, 1, 1),
                        timezones=st.just(UTC))
PERIODS = st.one_of(
    st.builds(Span, st.integers(1, 48), st.just("h")),
    st.builds(Span, st.integers(1, 400), st.just("d")),
    st.builds(Span, st.sampled_from([1, 2, 3, 4, 6, 12]), st.just("mo")),
    st.builds(Span, st.integers(1, 100), st.just("y")),
)


def test_spellings() -> None:
    assert parse_span("off") is None
    assert parse_span("6mo") == Span(6, "mo")
    assert parse_span("30d") == Span(30, "d")
    assert parse_span("1h") == Span(1, "h")
    assert str(parse_span("2y")) == "2y"
    for bad in ("", "0h", "6", "mo", "5mo", "1.5d", "-1d", "1 h", "1H", "101y", "06h", "１h"):
        with pytest.raises(ValueError):
            parse_span(bad)
        assert span_problem(bad)
    assert span_problem("12h") is None and span_problem("off") is None


def test_known_boundaries() -> None:
    at = datetime(2027, 5, 17, 13, 45, tzinfo=UTC)
    assert period_start(Span(6, "mo"), at) == datetime(2027, 1, 1, tzinfo=UTC)
    assert next_boundary(Span(6, "mo"), at) == datetime(2027, 7, 1, tzinfo=UTC)
    assert next_boundary(Span(6, "mo"), datetime(2027, 7, 1, tzinfo=UTC)) == datetime(
        2028, 1, 1, tzinfo=UTC)
    assert period_start(Span(3, "mo"), at) == datetime(2027, 4, 1, tzinfo=UTC)
    assert period_start(Span(1, "h"), at) == datetime(2027, 5, 17, 13, tzinfo=UTC)
    assert period_start(Span(12, "h"), at) == datetime(2027, 5, 17, 12, tzinfo=UTC)
    assert period_start(Span(1, "d"), at) == datetime(2027, 5, 17, tzinfo=UTC)
    # 30d: days since 1970-01-01 that are multiples of 30 (2027-05-17 is day 20955).
    assert period_start(Span(30, "d"), at) == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
        days=20940)
    assert period_start(Span(1, "y"), at) == datetime(2027, 1, 1, tzinfo=UTC)
    assert period_start(Span(10, "y"), at) == datetime(2020, 1, 1, tzinfo=UTC)


@given(PERIODS, INSTANTS)
def test_a_boundary_is_at_or_before_and_the_next_strictly_after(period: Span,
                                                                  at: datetime) -> None:
    start, nxt = period_start(period, at), next_boundary(period, at)
    assert start <= at < nxt
    # Boundaries are fixed points: every instant of the period names the same one.
    assert period_start(period, start) == start
    assert period_start(period, nxt - timedelta(microseconds=1)) == start
    assert period_start(period, nxt) == nxt
    assert next_boundary(period, start) == nxt
    assert start.tzinfo is UTC and start.microsecond == 0


@given(PERIODS, INSTANTS)
def test_boundaries_are_calendar_aligned(period: Span, at: datetime) -> None:
    start = period_start(period, at)
    assert (start.minute, start.second) == (0, 0)
    if period.unit == "h" and 24 % period.count == 0:
        assert start.hour % period.count == 0
    if period.unit in ("d", "mo", "y"):
        assert start.hour == 0
    if period.unit == "mo":
        assert start.day == 1 and (start.month - 1) % period.count == 0
    if period.unit == "y":
        assert (start.month, start.day) == (1, 1) and start.year % period.count == 0


@given(PERIODS, INSTANTS, st.timezones())
def test_the_same_instant_in_any_timezone_has_the_same_boundary(period: Span, at: datetime,
                                                                 tz: object) -> None:
    assert period_start(period, at.astimezone(tz)) == period_start(period, at)  # type: ignore[arg-type]


@given(PERIODS, INSTANTS)
def test_age_cutoff_is_before_and_of_the_right_length(age: Span, at: datetime) -> None:
    cutoff = age_cutoff(age, at)
    assert cutoff < at
    days = {"h": age.count / 24, "d": age.count, "mo": age.count * 28,
            "y": age.count * 365}[age.unit]
    assert at - cutoff >= timedelta(days=days)
    if age.unit in ("mo", "y"):
        assert at - cutoff <= timedelta(days=age.count * (31 if age.unit == "mo" else 366))


def test_age_cutoff_clamps_the_day() -> None:
    assert age_cutoff(Span(1, "mo"), datetime(2027, 3, 31, 8, tzinfo=UTC)) == datetime(
        2027, 2, 28, 8, tzinfo=UTC)
    assert age_cutoff(Span(2, "y"), datetime(2028, 2, 29, tzinfo=UTC)) == datetime(
        2026, 2, 28, tzinfo=UTC)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        period_start(Span(1, "h"), datetime(2027, 1, 1))

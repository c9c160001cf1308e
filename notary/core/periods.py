"""When a notary rolls to a new log on its own, and when a frozen log is old enough to prune
(pure, no I/O; docs/lifecycle.md).

A *period* (``--log-period``) is a whole number of hours, days, months or years, written
``12h``, ``30d``, ``6mo``, ``1y``; ``off`` is none. Its *boundaries* are fixed instants of UTC,
the same for every process whatever its start time, so that every process of a notary agrees
on them and a roll happens at most once per boundary:

- ``Nh``: every instant whose count of whole hours since 1970-01-01T00:00Z is a multiple of N
  (for N dividing 24, ``00:00`` UTC is always one);
- ``Nd``: 00:00 UTC of every day whose count of days since 1970-01-01 is a multiple of N;
- ``Nmo`` (N dividing 12: 1, 2, 3, 4, 6, 12): 00:00 UTC on the 1st of every month whose number
  of months since January is a multiple of N (``6mo``: January 1 and July 1);
- ``Ny``: 00:00 UTC on January 1 of every year that is a multiple of N.

A log is due to roll when it started before the latest boundary (:func:`period_start`):
a notary stopped across several boundaries rolls once, not once per missed period.

An *age* (``--log-retention``) has the same spelling; a frozen log older than it was frozen
before :func:`age_cutoff`: the same clock time N hours, days, months or years earlier (a day
of the month that the earlier month lacks becomes its last day).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["Span", "age_cutoff", "next_boundary", "parse_span", "period_start", "span_problem"]

_UNITS = {"h": "hours", "d": "days", "mo": "months", "y": "years"}
_SPAN = re.compile(r"([1-9][0-9]{0,4})(h|d|mo|y)")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MONTHS_DIVIDING_A_YEAR = (1, 2, 3, 4, 6, 12)


@dataclass(frozen=True)
class Span:
    """A number of hours, days, months or years: a period, or an age."""

    count: int
    unit: str  # "h", "d", "mo" or "y"

    def __str__(self) -> str:
        return f"{self.count}{self.unit}"


def parse_span(text: str) -> Span | None:
    """``12h``, ``30d``, ``6mo``, ``2y`` as a :class:`Span`; None for ``off``. ValueError for
    anything else (:func:`span_problem` words it)."""
    if text == "off":
        return None
    m = _SPAN.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not off nor a whole number followed by h, d, mo or y "
                         "(12h, 30d, 6mo, 1y)")
    span = Span(int(m.group(1)), m.group(2))
    if span.unit == "y" and span.count > 100:
        raise ValueError(f"{text!r}: at most 100y")
    if span.unit == "mo" and span.count not in _MONTHS_DIVIDING_A_YEAR:
        raise ValueError(f"{text!r}: months must divide a year (1, 2, 3, 4, 6 or 12mo), so that "
                         "every year has the same boundaries")
    return span


def span_problem(text: object) -> str | None:
    """What is wrong with a setting's text, or None (a rule of ``notary.serving.config``)."""
    if not isinstance(text, str):
        return f"{text!r} is not text"
    try:
        parse_span(text)
    except ValueError as e:
        return str(e)
    return None


def _utc(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise ValueError("a period boundary needs a timezone-aware datetime")
    return at.astimezone(UTC)


def period_start(period: Span, at: datetime) -> datetime:
    """The latest boundary of ``period`` at or before ``at`` (see the module)."""
    at = _utc(at)
    n = period.count
    if period.unit == "h":
        hours = (at - _EPOCH) // timedelta(hours=1)
        return _EPOCH + timedelta(hours=hours - hours % n)
    if period.unit == "d":
        days = (at - _EPOCH) // timedelta(days=1)
        return _EPOCH + timedelta(days=days - days % n)
    if period.unit == "mo":
        month = at.month - 1 - (at.month - 1) % n
        return datetime(at.year, month + 1, 1, tzinfo=UTC)
    return datetime(at.year - at.year % n, 1, 1, tzinfo=UTC)


def next_boundary(period: Span, at: datetime) -> datetime:
    """The first boundary of ``period`` strictly after ``at``."""
    start = period_start(period, at)
    n = period.count
    if period.unit == "h":
        return start + timedelta(hours=n)
    if period.unit == "d":
        return start + timedelta(days=n)
    if period.unit == "mo":
        months = start.month - 1 + n
        return datetime(start.year + months // 12, months % 12 + 1, 1, tzinfo=UTC)
    return datetime(start.year + n, 1, 1, tzinfo=UTC)


def age_cutoff(age: Span, at: datetime) -> datetime:
    """``at`` less ``age`` (see the module): a log frozen before it is older than ``age``."""
    at = _utc(at)
    if age.unit == "h":
        return at - timedelta(hours=age.count)
    if age.unit == "d":
        return at - timedelta(days=age.count)
    months = at.year * 12 + at.month - 1 - age.count * (12 if age.unit == "y" else 1)
    year, month = divmod(months, 12)
    if year < 1:
        return datetime.min.replace(tzinfo=UTC)
    day = min(at.day, calendar.monthrange(year, month + 1)[1])
    return at.replace(year=year, month=month + 1, day=day)

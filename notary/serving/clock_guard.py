"""The write path's clock policy: no receipt carries a time in the future of a frontend's clock.

``issued_at`` never decreases along the log (:meth:`notary.serving.service.Notary.screen`), so
one frontend whose clock ran ahead would pin every later receipt to its future time. The guard
refuses a batch instead, in two cases: the log's latest ``issued_at`` is more than
:data:`MAX_AHEAD` past this process's clock (:class:`ClockBehindLog`), or this clock is more
than that ahead of the database server's (:class:`ClockAheadOfDatabase`). It remembers which,
for ``/healthz`` (:meth:`ClockGuard.problem`), and logs one line when refusing starts and one
when it ends.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import structlog

from notary.core.ids import format_issued_at, parse_issued_at
from notary.serving.refusals import ClockAheadOfDatabase, ClockBehindLog, ServiceRefusal

MAX_AHEAD = timedelta(seconds=5)
"""How far past this process's clock an ``issued_at`` may be: the log's latest one may be
ahead by this much (another frontend's clock a little ahead, a batch's commit wait) and a new
receipt still take it; further ahead, writes are refused rather than signed with a future
time (:class:`ClockBehindLog`)."""
_log = structlog.get_logger("notary")


def utc_now() -> datetime:
    """This process's clock (what :attr:`Notary.clock` reads unless a test sets another)."""
    return datetime.now(UTC)


class ClockGuard:
    """Whether a batch may be stamped by this clock, and why not while it may not."""

    def __init__(self) -> None:
        #: While refusing: the log's latest ``issued_at`` that is too far ahead.
        self.behind: str | None = None
        #: While refusing: the database's clock that this one is too far ahead of.
        self.ahead_of: str | None = None

    def problem(self, now: datetime) -> str | None:
        """Why writes are refused for the clock (for /healthz), or None: the last batch found
        this clock too far ahead of the database's, or the log's latest ``issued_at`` too far
        ahead of this clock (and it has not caught up since)."""
        if self.ahead_of is not None:
            return (f"writes are refused: this process's clock is more than "
                    f"{MAX_AHEAD.total_seconds():g} s ahead of the database server's "
                    f"({self.ahead_of} when last compared); fix this machine's clock")
        if self.behind is None or self.behind <= format_issued_at(now + MAX_AHEAD):
            return None
        return (f"writes are refused: the log's latest issued_at ({self.behind}) is more than "
                f"{MAX_AHEAD.total_seconds():g} s ahead of this process's clock; check the "
                "clocks of the notary's frontends")

    def refusal(self, tail: str | None, store_clock: str | None, now: datetime
                ) -> ServiceRefusal | None:
        """The refusal for a batch when this clock (``now``) is too far ahead of the
        database's (so it would stamp the future), or the log's latest time (``tail``) too far
        ahead of this clock (so it would take a future time), else None."""
        if store_clock is not None and \
                format_issued_at(now) > format_issued_at(parse_issued_at(store_clock) + MAX_AHEAD):
            if self.ahead_of is None:
                _log.error("clock_ahead_of_database", database_time=store_clock,
                           local_time=format_issued_at(now),
                           detail="this process's clock is ahead of the database server's; "
                                  "writes are refused rather than signed with a future time")
            self.ahead_of = store_clock
            return ClockAheadOfDatabase(
                f"this notary's clock ({format_issued_at(now)}) is ahead of its database "
                f"server's ({store_clock}) by more than {MAX_AHEAD.total_seconds():g} s; no "
                "receipt is issued with a time in the future of the other frontends' (the "
                "operator must fix this frontend's clock)")
        if self.ahead_of is not None:
            _log.info("clock_back_in_step", database_time=store_clock)
            self.ahead_of = None
        return self._too_far_ahead(tail, now)

    def _too_far_ahead(self, tail: str | None, now: datetime) -> ClockBehindLog | None:
        """The refusal for a batch whose latest logged ``issued_at`` is more than
        :data:`MAX_AHEAD` past this process's clock, else None; one log line when refusing
        starts and one when it ends (:attr:`behind` says so in between)."""
        if tail is None or tail <= format_issued_at(now + MAX_AHEAD):
            if self.behind is not None:
                _log.info("clock_caught_up", log_latest_issued_at=self.behind)
                self.behind = None
            return None
        if self.behind is None:
            _log.error("clock_behind_log", log_latest_issued_at=tail,
                       local_time=format_issued_at(now),
                       detail="the log's latest issued_at is ahead of this process's clock; "
                              "writes are refused rather than signed with a future time")
        self.behind = tail
        wait = (parse_issued_at(tail) - now - MAX_AHEAD).total_seconds()
        return ClockBehindLog(
            f"the log's latest issued_at ({tail}) is ahead of this notary's clock "
            f"({format_issued_at(now)}) by more than {MAX_AHEAD.total_seconds():g} s; a receipt "
            "issued now would carry a future time, so none is issued (the operator must check "
            "the clocks of the notary's frontends)",
            headers={"Retry-After": str(max(1, min(3600, int(wait) + 1)))})

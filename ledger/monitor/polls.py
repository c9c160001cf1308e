"""Several logs in one monitor run: a :class:`~ledger.monitor.core.Monitor` per log key.

The generic monitor watches one log under one pinned key. A service that runs a *sequence* of
logs (the notary rolls to a new log now and then, docs/lifecycle.md) needs one monitor run to
audit each of them, under keys it learns as it goes. The ledger does not know how those keys
are learnt (for the notary, from a successor record in the previous log): a :data:`Driver`
does, and polls each log through :class:`LogPolls`, which keeps one monitor (state file,
audit position) per log and records every alarm against the log it concerns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import IO

from ledger.client.http import HttpClient
from ledger.client.tiles import LogSource
from ledger.core.note import NoteVerifier
from ledger.monitor.core import (
    Alarm,
    Monitor,
    MonitorConfig,
    MonitorMetrics,
    PollReport,
    write_evidence,
)

__all__ = ["Driver", "LogPolls", "StateFor", "one_log"]

StateFor = Callable[[str, str], "Path | None"]
"""The state file of a log, given its origin and verifier key (None: keep no state)."""


class LogPolls:
    """The monitors of one run, made on first use and kept across a daemon's polls.

    ``config`` is the pinned log's (its ``url``, key and state file); every other log gets a
    copy with its own URL, key and ``state_for`` file, and the same witnesses, audit and
    evidence settings. All share ``metrics``: the size gauges show the log polled last.
    """

    def __init__(self, config: MonitorConfig, http: HttpClient, metrics: MonitorMetrics, *,
                 out: IO[str], state_for: StateFor) -> None:
        self.config = config
        self.http = http
        self.metrics = metrics
        self.out = out
        self.state_for = state_for
        self._monitors: dict[str, Monitor] = {}
        self._retired: list[Monitor] = []  # moved to another URL; closed at the end
        #: The monitor of the log polled last: an alarm raised after it concerns that log.
        self.current: Monitor | None = None

    def monitor(self, url: str, verifier: NoteVerifier, vkey: str) -> Monitor:
        """The monitor of the log under ``vkey`` at ``url`` (raises MonitorStateError when its
        state file belongs to another log or does not verify)."""
        known = self._monitors.get(vkey)
        if known is not None and known.config.url == url.rstrip("/"):
            return known
        if vkey == self.config.log_vkey:
            cfg = replace(self.config, url=url.rstrip("/"))
        else:
            cfg = replace(self.config, url=url.rstrip("/"), log_verifier=verifier,
                          log_vkey=vkey, state_path=self.state_for(verifier.name, vkey))
        monitor = Monitor(cfg, LogSource(cfg.url, self.http, timeout=cfg.timeout),
                          self.metrics, out=self.out)
        if known is not None:
            self._retired.append(known)
        self._monitors[vkey] = monitor
        return monitor

    async def poll(self, url: str, verifier: NoteVerifier, vkey: str
                   ) -> tuple[Monitor, PollReport]:
        """Poll one log; an alarm it raises is recorded against it."""
        monitor = self.monitor(url, verifier, vkey)
        self.current = monitor
        return monitor, await monitor.poll()

    def record(self, alarm: Alarm) -> Path:
        """Count the alarm and write its evidence, naming the log polled last (the pinned
        log if none was)."""
        if self.current is not None:
            return self.current.record(alarm)
        cfg = self.config
        self.metrics.alarms.labels(alarm.kind).inc()
        self.metrics.alarm_active.set(1)
        return write_evidence(cfg.evidence_dir, alarm, {
            "url": cfg.url, "origin": cfg.log_verifier.name, "vkey": cfg.log_vkey})

    async def close(self) -> None:
        for monitor in [*self._monitors.values(), *self._retired]:
            await monitor.source.close()


Driver = Callable[[LogPolls], Awaitable["list[tuple[str, PollReport]]"]]
"""Polls the logs of one run through ``LogPolls`` and returns (origin, report) for each, in
order; raises :class:`~ledger.monitor.core.Alarm` when the logs contradict each other."""


async def one_log(polls: LogPolls) -> list[tuple[str, PollReport]]:
    """The driver of a plain tlog: the one pinned log at ``--log``."""
    cfg = polls.config
    _, report = await polls.poll(cfg.url, cfg.log_verifier, cfg.log_vkey)
    return [(cfg.log_verifier.name, report)]

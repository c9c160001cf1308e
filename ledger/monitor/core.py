"""The monitor: verify each new checkpoint of a log against the last one, audit, and alarm.

One poll:

1. ``GET /checkpoint``; the log's signature must verify under the pinned key and, when witnesses
   are configured, at least ``quorum`` of them must have cosigned it;
2. compare with the last verified checkpoint: a smaller size is a *rollback*, the same size with
   another root a *fork*, a larger size needs a consistency proof that verifies (from the log's
   JSON API, with its tiles as a second opinion), else the log is *inconsistent*;
3. remember it (atomically, so a restart continues from it);
4. with ``audit``, download what the checkpoint added, recompute every tile and the root
   (:mod:`ledger.monitor.audit`), and report new entries whose ``server`` is watched.

Anything that contradicts what was verified is an :class:`Alarm`: it is written as a JSON
evidence file (both checkpoints and the failing proof or tile, enough for a third party to check
the claim offline), printed on stderr and counted in the metrics; the state does not advance past
it. A log that cannot be reached is not an alarm (:class:`~ledger.client.http.FetchError`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge
from tqdm import tqdm

from ledger.client.http import FetchError
from ledger.client.tiles import LogSource
from ledger.core.checkpoint import (
    Checkpoint,
    CheckpointError,
    open_checkpoint,
    parse_checkpoint_text,
)
from ledger.core.compact import TreeState
from ledger.core.errors import LedgerError
from ledger.core.hashing import EMPTY_ROOT
from ledger.core.note import InvalidSignatureError, NoteError, NoteVerifier, parse_note
from ledger.core.proofs import ProofError, verify_consistency
from ledger.core.tlog_policy import TlogPolicy
from ledger.monitor.audit import AuditAlarm, ProgressHook, audit_range
from ledger.monitor.state import MonitorState, MonitorStateError, load_state, save_state
from ledger.process.atomic import write_atomic

__all__ = ["Alarm", "Monitor", "MonitorConfig", "MonitorMetrics", "PollReport"]

_log = structlog.get_logger("ledger.monitor")

#: Audits longer than this many entries show a progress bar (on a terminal).
PROGRESS_MIN_ENTRIES = 50_000


class Alarm(LedgerError):
    """The log contradicted what the monitor verified before (or its own signed statements)."""

    def __init__(self, kind: str, message: str, evidence: dict[str, object] | None = None
                 ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.evidence = evidence or {}


EntryFilter = Callable[[int, bytes], "tuple[str, dict[str, object]] | None"]
"""EntryFilter picks the entries an audit reports as it downloads them: for an entry of interest
it returns a label (counted in the ``watched`` metric) and the fields of the JSON line printed.
The log is generic; what an entry means is the filter's business (the notary passes one that
decodes its rs-tool-call/1 entries)."""


@dataclass(frozen=True)
class MonitorConfig:
    url: str
    log_verifier: NoteVerifier
    log_vkey: str
    witnesses: tuple[NoteVerifier, ...] = ()
    quorum: int = 0
    state_path: Path | None = None
    entry_filter: EntryFilter | None = None
    audit: bool = False
    evidence_dir: Path = Path("monitor-evidence")
    timeout: float = 30.0
    progress: bool = True
    policy: TlogPolicy | None = None  # a C2SP tlog-policy, instead of witnesses and quorum


class MonitorMetrics:
    """Prometheus metrics of one monitor, in their own registry."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.verified_size = Gauge("notary_monitor_verified_size",
                                   "Tree size of the last verified checkpoint", registry=r)
        self.audited_size = Gauge("notary_monitor_audited_size",
                                  "Tree size up to which every tile was recomputed", registry=r)
        self.alarms = Counter("notary_monitor_alarms_total", "Alarms raised", ["kind"],
                              registry=r)
        self.alarm_active = Gauge("notary_monitor_alarm_active",
                                  "1 while the last poll ended in an alarm", registry=r)
        self.entries_audited = Counter("notary_monitor_entries_audited_total",
                                       "Entries downloaded and re-hashed", registry=r)
        self.fetch_errors = Counter("notary_monitor_fetch_errors_total",
                                    "Polls that could not reach the log", registry=r)
        self.watched = Counter("notary_monitor_watched_entries_total",
                               "New entries of watched servers", ["server"], registry=r)
        self.last_success = Gauge("notary_monitor_last_success_timestamp_seconds",
                                  "UNIX time of the last poll that verified", registry=r)


@dataclass
class PollReport:
    """What one successful poll established."""

    size: int
    previous: int | None
    audited: int = 0
    audit_seconds: float = 0.0
    watched: list[dict[str, object]] = field(default_factory=list)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _text(note: bytes | None) -> str | None:
    return None if note is None else note.decode("utf-8", "replace")


class Monitor:
    """Polls one log; keeps its state in memory and, when configured, in the state file."""

    def __init__(self, config: MonitorConfig, source: LogSource,
                 metrics: MonitorMetrics | None = None, *, out: IO[str] | None = None) -> None:
        self.config = config
        self.source = source
        self.metrics = metrics or MonitorMetrics()
        self.out = out if out is not None else sys.stdout
        self.state = self._load()
        self._watched: list[dict[str, object]] = []

    # State ------------------------------------------------------------------------------------

    def _load(self) -> MonitorState:
        cfg = self.config
        fresh = MonitorState(origin=cfg.log_verifier.name, vkey=cfg.log_vkey)
        if cfg.state_path is None:
            return fresh
        state = load_state(cfg.state_path)
        if state is None:
            return fresh
        if state.vkey != cfg.log_vkey:
            raise MonitorStateError(f"{cfg.state_path} is the state of log {state.vkey}, not of "
                             f"{cfg.log_vkey}")
        if state.checkpoint is not None:
            try:
                cp, _ = open_checkpoint(state.checkpoint, cfg.log_verifier)
            except NoteError as e:
                raise MonitorStateError(
                    f"{cfg.state_path}: the saved checkpoint does not verify: {e}") from None
            for tree in (state.audit, state.progress):
                if tree is not None and tree.size > cp.size:
                    raise MonitorStateError(f"{cfg.state_path}: audit state beyond the checkpoint")
        if state.audit is not None:
            self.metrics.audited_size.set(state.audit.size)
        return state

    def _save(self) -> None:
        if self.config.state_path is not None:
            save_state(self.config.state_path, self.state)

    @property
    def verified(self) -> Checkpoint | None:
        if self.state.checkpoint is None:
            return None
        return parse_checkpoint_text(parse_note(self.state.checkpoint).text)

    # One poll -------------------------------------------------------------------------------

    async def poll(self) -> PollReport:
        """Fetch, verify and (optionally) audit the log's current checkpoint."""
        data = await self.source.checkpoint()
        cp = self._verify(data)
        old_note = self.state.checkpoint
        old = self.verified
        if old is None:
            if cp.size == 0 and cp.root_hash != EMPTY_ROOT:
                raise Alarm("bad_checkpoint", "a size-0 checkpoint with a root other than the "
                            "empty tree's", {"new_checkpoint": _text(data)})
        elif cp.size < old.size:
            raise Alarm("rollback", f"the log now serves size {cp.size}, after {old.size} was "
                        "verified", {"old_checkpoint": _text(old_note),
                                     "new_checkpoint": _text(data)})
        elif cp.size == old.size and cp.root_hash != old.root_hash:
            raise Alarm("fork", f"two different roots signed for size {cp.size}",
                        {"old_checkpoint": _text(old_note), "new_checkpoint": _text(data)})
        elif cp.size > old.size and old.size > 0:
            await self._check_consistency(old, old_note, cp, data)
        self.state = replace(self.state, checkpoint=data)
        self._save()
        self.metrics.verified_size.set(cp.size)
        report = PollReport(cp.size, None if old is None else old.size)
        if self.config.audit:
            await self._audit(cp, data, report)
        self.metrics.last_success.set(time.time())
        return report

    def _verify(self, data: bytes) -> Checkpoint:
        cfg = self.config
        try:
            cp = parse_checkpoint_text(parse_note(data).text)
        except NoteError as e:
            raise Alarm("bad_checkpoint", f"malformed checkpoint: {e}",
                        {"new_checkpoint": _text(data)}) from None
        if cp.origin != cfg.log_verifier.name:
            raise Alarm("bad_checkpoint", f"checkpoint origin {cp.origin!r} is not "
                        f"{cfg.log_verifier.name!r}", {"new_checkpoint": _text(data)})
        try:
            open_checkpoint(data, cfg.log_verifier)
        except NoteError as e:
            raise Alarm("bad_signature", f"log signature: {e}",
                        {"new_checkpoint": _text(data)}) from None
        if cfg.policy is not None:
            try:
                cfg.policy.verify(data, [cfg.log_verifier])
            except InvalidSignatureError as e:
                raise Alarm("bad_signature", f"witness cosignature: {e}",
                            {"new_checkpoint": _text(data)}) from None
            except NoteError as e:
                raise Alarm("witness_quorum", str(e), {"new_checkpoint": _text(data)}) from None
        elif cfg.quorum:
            try:
                open_checkpoint(data, cfg.log_verifier, cfg.witnesses, cfg.quorum)
            except InvalidSignatureError as e:
                raise Alarm("bad_signature", f"witness cosignature: {e}",
                            {"new_checkpoint": _text(data)}) from None
            except CheckpointError as e:
                raise Alarm("witness_quorum", str(e), {"new_checkpoint": _text(data)}) from None
        return cp

    async def _check_consistency(self, old: Checkpoint, old_note: bytes | None,
                                 new: Checkpoint, new_note: bytes) -> None:
        proof = await self.source.consistency_proof(old.size, new.size)
        try:
            verify_consistency(old.size, new.size, old.root_hash, new.root_hash, proof)
            return
        except ProofError as e:
            failure = str(e)
        # A second opinion from the tiles: a bad answer from a proof API is not yet a fork.
        try:
            from_tiles: list[bytes] | None = await self.source.consistency_from_tiles(
                old.size, new.size)
        except FetchError:
            from_tiles = None
        if from_tiles is not None and from_tiles != proof:
            try:
                verify_consistency(old.size, new.size, old.root_hash, new.root_hash, from_tiles)
            except ProofError:
                pass
            else:
                _log.warning("bad_proof_api", old=old.size, new=new.size, reason=failure)
                return
        raise Alarm(
            "inconsistent",
            f"no valid consistency proof from size {old.size} to {new.size}: {failure}",
            {"old_checkpoint": _text(old_note), "new_checkpoint": _text(new_note),
             "proof": {"old": old.size, "new": new.size, "hashes": [_b64(h) for h in proof],
                       **({"from_tiles": [_b64(h) for h in from_tiles]}
                          if from_tiles is not None else {})}},
        )

    # Audit ------------------------------------------------------------------------------------

    async def _audit(self, cp: Checkpoint, note: bytes, report: PollReport) -> None:
        start = self.state.progress or self.state.audit or TreeState()
        if start.size > cp.size:  # cannot happen for a consistent log; start over to be sure
            start = TreeState()
        total = cp.size - start.size
        bar, close = _progress_bar(total if self.config.progress else 0)
        self._watched = []

        async def save(progress: TreeState) -> None:
            self.state = replace(self.state, progress=progress)
            self._save()

        try:
            result = await audit_range(self.source, start, cp, on_entries=self._on_entries,
                                       progress=bar, save=save)
        except AuditAlarm as a:
            # Progress towards this checkpoint is not trustworthy: restart from the last root
            # that matched.
            self.state = replace(self.state, progress=None)
            self._save()
            raise Alarm(a.kind, a.message, {"new_checkpoint": _text(note), **a.evidence,
                                            "audited_from": start.size}) from None
        finally:
            close()
        self.state = replace(self.state, audit=result.state, progress=None)
        self._save()
        self.metrics.entries_audited.inc(result.entries)
        self.metrics.audited_size.set(result.state.size)
        report.audited = result.entries
        report.audit_seconds = result.seconds
        report.watched = self._watched

    def _on_entries(self, first: int, entries: Sequence[bytes]) -> None:
        pick = self.config.entry_filter
        if pick is None:
            return
        for i, entry in enumerate(entries):
            hit = pick(first + i, entry)
            if hit is None:
                continue
            label, fields = hit
            item = {"event": "watched_entry", "index": first + i, **fields}
            self._watched.append(item)
            self.metrics.watched.labels(label).inc()
            self.out.write(json.dumps(item) + "\n")
        self.out.flush()

    # Alarms -----------------------------------------------------------------------------------

    def record(self, alarm: Alarm) -> Path:
        """Count the alarm and write its evidence file (once per distinct evidence)."""
        self.metrics.alarms.labels(alarm.kind).inc()
        self.metrics.alarm_active.set(1)
        return write_evidence(self.config.evidence_dir, alarm, {
            "url": self.config.url, "origin": self.config.log_verifier.name,
            "vkey": self.config.log_vkey})


def write_evidence(directory: Path, alarm: Alarm, log: dict[str, str]) -> Path:
    """Save ``alarm`` as JSON; the name is derived from the content, so repeats do not pile up."""
    doc: dict[str, object] = {"kind": alarm.kind, "message": alarm.message, "log": log,
                           **alarm.evidence}
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
    path = directory / f"{alarm.kind}-{digest}.json"
    if path.exists():
        return path
    doc["time"] = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    write_atomic(path, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
    return path


def _progress_bar(total: int) -> tuple[ProgressHook | None, Callable[[], None]]:
    """(update, close) for a tqdm bar on stderr, or no-ops for short audits."""
    if total < PROGRESS_MIN_ENTRIES:
        return None, lambda: None
    bar = tqdm(total=total, unit="entry", unit_scale=True, file=sys.stderr, disable=None,
               leave=False, desc="audit")

    def update(done: int, _total: int) -> None:
        bar.update(done - bar.n)

    return update, bar.close


__all__ += ["FetchError", "MonitorStateError", "write_evidence"]

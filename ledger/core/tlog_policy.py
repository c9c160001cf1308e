"""C2SP tlog-policy: which logs and witnesses a verifier trusts, and the quorum rule over them.

A policy file is line based::

    log <vkey> [<url>]            (Ed25519 0x01 or ML-DSA-44 0x06)
    witness <name> <vkey> [<url>] (cosignature/v1 0x04 or ML-DSA-44 0x06)
    group <name> all|any|<k> <member>...
    quorum <name>|none

A checkpoint meets the policy when one of the listed logs signed it and the quorum (a witness,
or a group that needs k of its members, recursively) has cosigned it. Parsing follows the spec
strictly (https://c2sp.org/tlog-policy): names are defined before use, witnesses and groups
share one namespace where ``none`` is reserved, each name is a group member at most once, keys
are never listed twice (the same public key under another name counts as a duplicate), and
exactly one quorum line. Names and URLs are opaque; only tab, newline and printable ASCII or
bytes ≥ 0x80 may appear. The text must be UTF-8 without a byte order mark, and groups may nest
at most :data:`MAX_GROUP_DEPTH` deep: one decoding rule and one bound, the JavaScript
verifier's too (js/src/policy.js), so the two read every file alike and evaluating a quorum
never recurses without bound.

Pure code: parsing and evaluation, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ledger.core.checkpoint import Checkpoint, parse_checkpoint_text
from ledger.core.cosignature import LogVerifier, parse_log_key, parse_witness_key
from ledger.core.errors import LedgerError
from ledger.core.note import (
    NoteError,
    NoteVerifier,
    UnverifiedNoteError,
    open_note,
    parse_note,
)

__all__ = ["MAX_GROUP_DEPTH", "TlogPolicy", "TlogPolicyError", "TlogPolicyNotMet",
           "parse_tlog_policy"]

MAX_GROUP_DEPTH = 32
"""Deepest nesting of groups (a group of witnesses is 1); real policies use 1 to 3."""

QUORUM_GROUP = "quorum"
"""The group :meth:`TlogPolicy.from_quorum` builds (k of the given witnesses)."""

NONE = "none"


class TlogPolicyError(LedgerError, ValueError):
    """The policy file is malformed."""


class TlogPolicyNotMet(NoteError):
    """A checkpoint that is not signed by a policy log, or not cosigned by the quorum."""


@dataclass(frozen=True)
class WitnessGroup:
    """A policy's group: ``threshold`` of its members (witnesses or groups) must hold."""

    threshold: int
    members: tuple[str, ...]


@dataclass(frozen=True)
class TlogPolicy:
    logs: tuple[tuple[LogVerifier, str | None], ...]
    witnesses: Mapping[str, tuple[NoteVerifier, str | None]]
    groups: Mapping[str, WitnessGroup]
    quorum: str  # a witness or group name, or "none"

    @property
    def witness_verifiers(self) -> list[NoteVerifier]:
        return [v for v, _ in self.witnesses.values()]

    @classmethod
    def from_quorum(cls, witnesses: Sequence[NoteVerifier], quorum: int,
                    urls: Sequence[str | None] | None = None) -> TlogPolicy:
        """The simple form ``--witness K1 --witness K2 --quorum k`` as a policy: k of them.

        Witnesses are named by their key names (``#2``, ``#3``... appended when two keys share
        a name); a key given twice counts once (cosignature/v1 does not commit to the name).
        ``quorum`` 0 means no cosignature is required (the witnesses are still counted).
        Raises :class:`TlogPolicyError` for a quorum the witnesses cannot meet.
        """
        if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 0:
            raise TlogPolicyError("the witness quorum must be a non-negative integer")
        named: dict[str, tuple[NoteVerifier, str | None]] = {}
        seen: set[bytes | tuple[str, int]] = set()
        for i, verifier in enumerate(witnesses):
            key = getattr(verifier, "public_key", None)
            ident: bytes | tuple[str, int] = (key if isinstance(key, bytes)
                                              else (verifier.name, verifier.key_id))
            if ident in seen:
                continue
            seen.add(ident)
            name, n = verifier.name, 1
            while name in named or name in (NONE, QUORUM_GROUP):
                n += 1
                name = f"{verifier.name}#{n}"
            named[name] = (verifier, urls[i] if urls is not None else None)
        if quorum > len(named):
            raise TlogPolicyError(f"a quorum of {quorum} cannot be met by {len(named)} distinct "
                              "witness key(s)")
        if quorum == 0:
            return cls((), named, {}, NONE)
        return cls((), named, {QUORUM_GROUP: WitnessGroup(quorum, tuple(named))}, QUORUM_GROUP)

    @property
    def requires_cosignatures(self) -> bool:
        """Whether a checkpoint needs any cosignature at all (the quorum is not ``none``)."""
        return self.quorum != NONE

    def describe(self) -> str:
        """The quorum rule in words: ``2 of 3 witnesses (a, b, c)``, or the group tree."""
        return self._describe(self.quorum)

    def _describe(self, name: str) -> str:
        if name == NONE:
            return "no cosignature required"
        if name in self.witnesses:
            return f"witness {name}"
        group = self.groups[name]
        inner = ", ".join(m if m in self.witnesses else f"({self._describe(m)})"
                          for m in group.members)
        label = "" if name == QUORUM_GROUP else f"group {name}: "
        return f"{label}{group.threshold} of {len(group.members)} ({inner})"

    @property
    def quorum_header(self) -> str:
        """A short form of the quorum for a header: ``k`` for k of the witnesses, else a name."""
        group = self.groups.get(self.quorum)
        if self.quorum == NONE:
            return "0"
        if self.quorum == QUORUM_GROUP and group is not None:
            return str(group.threshold)
        return self.quorum

    def cosigners(self, note: bytes, log_verifiers: Sequence[NoteVerifier] = ()) -> set[str]:
        """The policy witnesses with a verified cosignature on ``note`` (by policy name).

        A witness key that is also a log key never counts. Raises NoteError when a signature
        by a listed witness key does not verify (a forged or damaged line is an error, not
        merely a missing cosignature).
        """
        logs = {(v.name, v.key_id) for v in log_verifiers}
        candidates = [(n, v) for n, (v, _) in self.witnesses.items()
                      if (v.name, v.key_id) not in logs]
        if not candidates:
            return set()
        try:
            _, verified = open_note(note, [v for _, v in candidates])
        except UnverifiedNoteError:
            return set()
        ids = {(s.name, s.key_id) for s in verified}
        return {n for n, v in candidates if (v.name, v.key_id) in ids}

    def satisfied(self, cosigned: set[str]) -> bool:
        """Whether the witnesses named in ``cosigned`` (policy names) meet the quorum."""
        return self._holds(self.quorum, cosigned)

    def _holds(self, name: str, cosigned: set[str]) -> bool:
        if name == NONE:
            return True
        if name in self.witnesses:
            return name in cosigned
        group = self.groups[name]
        return sum(self._holds(m, cosigned) for m in group.members) >= group.threshold

    def verify(self, note: bytes, log_verifiers: Sequence[NoteVerifier] = ()
               ) -> tuple[Checkpoint, set[str]]:
        """Check a checkpoint note against the policy; returns it and the witnesses that cosigned.

        ``log_verifiers`` adds log keys known from elsewhere (a policy may list no log). Raises
        :class:`TlogPolicyNotMet`, or NoteError when a known key's signature does not verify.
        """
        logs: list[NoteVerifier] = [v for v, _ in self.logs]
        logs += [v for v in log_verifiers if all(
            (v.name, v.key_id) != (w.name, w.key_id) for w in logs)]
        witnesses = self.witness_verifiers
        try:
            _, verified = open_note(note, [*logs, *witnesses])
        except UnverifiedNoteError:
            raise TlogPolicyNotMet("the checkpoint carries no signature by a policy key") from None
        ids = {(s.name, s.key_id) for s in verified}
        cp = parse_checkpoint_text(parse_note(note).text)
        if not any((v.name, v.key_id) in ids and v.name == cp.origin for v in logs):
            raise TlogPolicyNotMet(f"checkpoint of {cp.origin!r} is not signed by a policy log")
        cosigned = {name for name, (v, _) in self.witnesses.items()
                    if (v.name, v.key_id) in ids}
        if not self.satisfied(cosigned):
            raise TlogPolicyNotMet(f"the quorum {self.quorum!r} is not met (cosigned by "
                               f"{sorted(cosigned) or 'no witness'})")
        return cp, cosigned

    def quorum_time(self, note: bytes, log_verifiers: Sequence[NoteVerifier] = ()
                    ) -> tuple[Checkpoint, int]:
        """Check ``note`` against the policy (:meth:`verify`) and say since when it is fresh:
        the newest time T such that the cosignatures timestamped T or later meet the quorum
        on their own (UNIX seconds, as the witnesses signed it).

        A checkpoint carries no time of the log's, but each cosignature does (cosignature/v1
        and subtree/v1 both start with an 8-byte timestamp): T is when the quorum last vouched
        for this checkpoint, which is what bounds its age for a client that bounds
        cosignatures' age, and what a health check compares with its bound. Raises as
        :meth:`verify` does.
        """
        cp, cosigned = self.verify(note, log_verifiers)
        by_key = {(v.name, v.key_id): name for name, (v, _) in self.witnesses.items()
                  if name in cosigned}
        times: dict[str, int] = {}
        for sig in parse_note(note).signatures:
            name = by_key.get((sig.name, sig.key_id))
            if name is not None and name not in times:  # the first line per key, as verified
                times[name] = int.from_bytes(sig.signature[:8], "big")
        counted: set[str] = set()
        for name, at in sorted(times.items(), key=lambda item: -item[1]):
            counted.add(name)
            if self.satisfied(counted):
                return cp, at
        # verify() found the quorum met: only a quorum of ``none`` gets here, with no time.
        raise TlogPolicyNotMet(f"the quorum {self.quorum!r} asks for no cosignature to date")


def _public_key(v: NoteVerifier) -> bytes:
    key = getattr(v, "public_key", None)
    assert isinstance(key, bytes)
    return key


def parse_tlog_policy(data: bytes | str) -> TlogPolicy:
    """Parse a C2SP tlog-policy file; raises :class:`TlogPolicyError` naming the line."""
    reader = _PolicyReader()
    for number, line in enumerate(_policy_text(data).split("\n"), 1):
        fields = line.replace("\t", " ").split()
        if not fields or fields[0].startswith("#"):
            continue
        reader.read_line(f"line {number}", fields[0], fields[1:])
    return reader.policy()


def _policy_text(data: bytes | str) -> str:
    """The policy as text: only tab, newline and printable bytes; UTF-8 without a BOM."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    for b in raw:
        if (b < 0x20 and b not in (0x09, 0x0A)) or b == 0x7F:
            raise TlogPolicyError(f"policy contains the forbidden byte 0x{b:02x}")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise TlogPolicyError("the policy starts with a byte order mark (BOM); write it as UTF-8 "
                              "without one")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TlogPolicyError(f"the policy is not UTF-8 (invalid byte at offset {e.start})"
                              ) from None


@dataclass
class _PolicyReader:
    """What the lines read so far defined: a line may only use names defined before it."""

    logs: list[tuple[LogVerifier, str | None]] = field(default_factory=list)
    witnesses: dict[str, tuple[NoteVerifier, str | None]] = field(default_factory=dict)
    groups: dict[str, WitnessGroup] = field(default_factory=dict)
    depths: dict[str, int] = field(default_factory=dict)  # each group's nesting depth
    members_used: set[str] = field(default_factory=set)
    keys: set[bytes] = field(default_factory=set)
    quorum: str | None = None

    def read_line(self, where: str, keyword: str, args: list[str]) -> None:
        if keyword == "log":
            self.log(where, args)
        elif keyword == "witness":
            self.witness(where, args)
        elif keyword == "group":
            self.group(where, args)
        elif keyword == "quorum":
            self.set_quorum(where, args)
        else:
            raise TlogPolicyError(f"{where}: unknown keyword {keyword!r}")

    def policy(self) -> TlogPolicy:
        if self.quorum is None:
            raise TlogPolicyError("the policy has no quorum line")
        return TlogPolicy(tuple(self.logs), self.witnesses, self.groups, self.quorum)

    def log(self, where: str, args: list[str]) -> None:
        if len(args) not in (1, 2):
            raise TlogPolicyError(f"{where}: want 'log <vkey> [<url>]'")
        try:
            log_key = parse_log_key(args[0])
        except NoteError as e:
            raise TlogPolicyError(f"{where}: bad log key: {e}") from None
        self._new_key(where, log_key.public_key)
        self.logs.append((log_key, args[1] if len(args) == 2 else None))

    def witness(self, where: str, args: list[str]) -> None:
        if len(args) not in (2, 3):
            raise TlogPolicyError(f"{where}: want 'witness <name> <vkey> [<url>]'")
        name = args[0]
        self._new_name(where, name)
        try:
            wkey: NoteVerifier = parse_witness_key(args[1])
        except NoteError as e:
            raise TlogPolicyError(f"{where}: bad witness key: {e}") from None
        self._new_key(where, _public_key(wkey))
        self.witnesses[name] = (wkey, args[2] if len(args) == 3 else None)

    def group(self, where: str, args: list[str]) -> None:
        if len(args) < 3:
            raise TlogPolicyError(f"{where}: want 'group <name> all|any|<k> <member>...'")
        name, k, members = args[0], args[1], args[2:]
        self._new_name(where, name)
        for m in members:
            if m not in self.witnesses and m not in self.groups:
                raise TlogPolicyError(f"{where}: member {m!r} is not defined before")
            if m in self.members_used:
                raise TlogPolicyError(f"{where}: {m!r} is already a group member")
            self.members_used.add(m)
        threshold = _threshold(where, k, len(members))
        depth = 1 + max(self.depths.get(m, 0) for m in members)
        if depth > MAX_GROUP_DEPTH:
            raise TlogPolicyError(f"{where}: group {name!r} nests {depth} deep, more than "
                                  f"{MAX_GROUP_DEPTH}")
        self.depths[name] = depth
        self.groups[name] = WitnessGroup(threshold, tuple(members))

    def set_quorum(self, where: str, args: list[str]) -> None:
        if len(args) != 1:
            raise TlogPolicyError(f"{where}: want 'quorum <name>'")
        if self.quorum is not None:
            raise TlogPolicyError(f"{where}: a second quorum line")
        if args[0] != NONE and args[0] not in self.witnesses and args[0] not in self.groups:
            raise TlogPolicyError(f"{where}: quorum {args[0]!r} is not defined before")
        self.quorum = args[0]

    def _new_name(self, where: str, name: str) -> None:
        """Witnesses and groups share one namespace, where ``none`` is reserved."""
        if name == NONE or name in self.witnesses or name in self.groups:
            raise TlogPolicyError(f"{where}: name {name!r} is reserved or already defined")

    def _new_key(self, where: str, key: bytes) -> None:
        """A public key is listed once, under any name, as a log's or a witness's."""
        if key in self.keys:
            raise TlogPolicyError(f"{where}: duplicate key")
        self.keys.add(key)


def _threshold(where: str, k: str, members: int) -> int:
    """A group's ``all``, ``any`` or k (1 to the number of members, written canonically)."""
    if k == "all":
        return members
    if k == "any":
        return 1
    if k.isascii() and k.isdigit() and k == str(int(k)):
        if not 1 <= int(k) <= members:
            raise TlogPolicyError(f"{where}: threshold {k} is not in 1..{members}")
        return int(k)
    raise TlogPolicyError(f"{where}: threshold must be all, any or a number")

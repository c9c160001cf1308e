"""The verification report: one verdict per level, the overall validity, text and JSON forms.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field

from ledger.core.checkpoint import Checkpoint
from notary.core.receipts import Receipt
from notary.core.verification import (
    LEVELS,
    LevelResult,
    Verdict,
    skipped,
)
from notary.verifier.state import (
    Conflict,
)


@dataclass
class Report:
    """Per-level results plus what a reader needs to act on them.

    ``conflicts`` holds the fork/rollback evidence of level 5 (both signed checkpoints).
    ``cose`` is the verdict on a COSE receipt given beside the call (None when none was): a
    line of its own, required when present, that leaves the five levels as they are.
    """

    verdict: Verdict
    receipt: Receipt | Mapping[str, object] | None = None
    checkpoint: Checkpoint | None = None
    conflicts: list[Conflict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    proof: str | None = None
    """The tlog-proof the verdict was reached on (the receipt's own, or a fetched upgrade)."""
    cose: LevelResult | None = None
    latest: Checkpoint | None = None
    """The log's latest checkpoint level 5 fetched and verified (a frozen log's: its final)."""

    def receipt_with_proof(self) -> dict[str, object] | None:
        """The receipt carrying the proof used: an upgraded receipt, ready to save."""
        if self.receipt is None:
            return None
        out = (self.receipt.to_json() if isinstance(self.receipt, Receipt)
               else dict(self.receipt))
        if self.proof is not None:
            out["proof"] = self.proof
        return out

    @property
    def valid(self) -> bool:
        """Every required level passed and none failed (and the COSE receipt, if given)."""
        return self.verdict.valid and not any(
            r.status == "failed" for r in self.verdict.levels.values()) and (
            self.cose is None or self.cose.status == "passed")

    @property
    def exit_code(self) -> int:
        return 0 if self.valid else 1

    def to_json(self) -> dict[str, object]:
        levels: dict[str, dict[str, object]] = {}
        for name in LEVELS:
            result = self.verdict.levels.get(name, skipped("not checked"))
            entry: dict[str, object] = {**result.to_json(),
                                        "required": name in self.verdict.required}
            if name == "consistency" and self.conflicts:
                entry["evidence"] = [c.to_json() for c in self.conflicts]
            levels[name] = entry
        out: dict[str, object] = {"valid": self.valid, "levels": levels,
                               "required": list(self.verdict.required)}
        if self.cose is not None:
            out["cose"] = {**self.cose.to_json(), "required": True}
        out["receipt"] = _receipt_summary(self.receipt)
        cp = self.checkpoint
        out["checkpoint"] = None if cp is None else {
            "origin": cp.origin, "size": cp.size,
            "root": base64.b64encode(cp.root_hash).decode()}
        out["notes"] = list(self.notes)
        return out

    def render(self) -> str:
        """The human-readable report."""
        lines = []
        summary = _receipt_summary(self.receipt)
        if summary:
            lines.append(f"Receipt {summary.get('id')}: server {summary.get('server')!r}, "
                         f"tool {summary.get('tool')!r}, issued {summary.get('issued_at')}")
            lines.append(f"  log {summary.get('origin')!r}, entry {summary.get('index')}")
        for i, name in enumerate(LEVELS, 1):
            result = self.verdict.levels.get(name, skipped("not checked"))
            tag = "required" if name in self.verdict.required else "optional"
            reason = f": {result.reason}" if result.reason else ""
            lines.append(f"  {i}. {name:<12} {result.status.upper():<8} ({tag}){reason}")
        if self.cose is not None:
            reason = f": {self.cose.reason}" if self.cose.reason else ""
            lines.append(f"     {'cose':<12} {self.cose.status.upper():<8} (required){reason}")
        for c in self.conflicts:
            lines.append(f"  EVIDENCE of a {c.kind.upper()}: {c.message}")
            for s in (c.first, c.second):
                lines.append(f"    {s.describe()}:")
                lines.extend("      " + ln for ln in s.note.decode("utf-8", "replace")
                             .rstrip("\n").split("\n"))
        lines.extend(f"  note: {n}" for n in self.notes)
        not_passed = [n for n in LEVELS if n in self.verdict.required
                      and self.verdict.levels.get(n, skipped("")).status != "passed"]
        if self.cose is not None and self.cose.status != "passed":
            not_passed.append("cose")
        lines.append("VALID: every required level passed." if self.valid
                     else "NOT VALID: " + ", ".join(not_passed) + " did not pass.")
        return "\n".join(lines)


def _receipt_summary(receipt: Receipt | Mapping[str, object] | None
                     ) -> dict[str, object] | None:
    """What the report shows of the receipt (a malformed one as far as it goes)."""
    if receipt is None:
        return None
    if isinstance(receipt, Receipt):
        receipt = receipt.to_json()
    ledger = receipt.get("ledger")
    ledger = ledger if isinstance(ledger, Mapping) else {}
    return {k: receipt.get(k) for k in ("id", "server", "tool", "call_sha256", "issued_at")} | {
        "origin": ledger.get("origin"), "index": ledger.get("index")}


def require_level(verdict: Verdict, level: str) -> None:
    """require_level makes ``level`` one the overall verdict needs passed."""
    if level not in verdict.required:
        verdict.required = (*verdict.required, level)

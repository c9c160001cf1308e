"""The evidence store: the tool calls a verifying client checked, kept where the verifier reads
them later (``notary verify DIR``, ``mcp-notary verify DIR``), and their one-file bundle.

A store is a directory of saved tool calls, one file per call, named ``<receipt id>.json``, each
exactly what ``notary verify CALL`` reads (``{tool, arguments, result, server?}``, the result as
wire JSON with its ``_meta`` as received). Files are written atomically (a temporary file,
fsynced, renamed), so a killed client leaves whole calls or none, and a reader never sees half
of one. A file is never overwritten: a receipt id that is already there means the server
replayed an earlier result for a new call (a fresh call always gets a fresh salt, hence a fresh
receipt).

A **bundle** is the store in one file, JSON Lines: a header line
``{"format": "mcp-notary-evidence/1", "calls": N}`` and then one saved call per line. The
header makes a bundle tell itself from a saved-call file, and its count makes a truncated
bundle an error rather than a shorter history. The JavaScript package reads and writes the same
two forms (js/src/evidence.js, js/src/node/evidence.js).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ledger.core.boundedjson import JsonError
from ledger.process.atomic import write_atomic
from notary.core.ids import is_receipt_id
from notary.verifier.inputs import MAX_INPUT_BYTES, VerifierInputError, parse_input_json

BUNDLE_FORMAT = "mcp-notary-evidence/1"
"""The ``format`` of a bundle's header line."""


@dataclass(frozen=True)
class EvidenceEntry:
    """One saved call of a store or bundle: where it came from, and the document (or why it
    cannot be read: a damaged entry is reported, and the others are still verified)."""

    source: str
    doc: object = None
    error: str | None = None


def _line(doc: object) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def bundle_text(calls: Iterable[object]) -> str:
    """Saved calls as a bundle (JSON Lines behind its header)."""
    lines = [_line(c) for c in calls]
    return "".join(f"{line}\n" for line in [_line({"format": BUNDLE_FORMAT,
                                                    "calls": len(lines)}), *lines])


def _bundle_header(data: bytes) -> int | None:
    """The call count of a bundle's header line; None when ``data`` is not a bundle."""
    first = data.split(b"\n", 1)[0]
    if not first.startswith(b"{") or b'"format"' not in first:
        return None
    try:
        header = parse_input_json(first)
    except JsonError:
        return None
    if not isinstance(header, dict) or header.get("format") != BUNDLE_FORMAT:
        return None
    count = header.get("calls")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise VerifierInputError("the evidence bundle's header has no valid 'calls' count")
    return count


def parse_bundle(data: bytes, name: str) -> list[EvidenceEntry] | None:
    """The saved calls of a bundle, or None when ``data`` is not one (a saved-call file)."""
    count = _bundle_header(data)
    if count is None:
        return None
    lines = [(n, ln) for n, ln in enumerate(data.split(b"\n")[1:], 2) if ln.strip(b" \t\r")]
    if len(lines) != count:
        raise VerifierInputError(f"the evidence bundle {name} announces {count} call(s) but "
                                 f"holds {len(lines)}: it is truncated or was edited")
    out = []
    for i, line in lines:
        try:
            out.append(EvidenceEntry(f"{name}:{i}", parse_input_json(line)))
        except JsonError as e:
            out.append(EvidenceEntry(f"{name}:{i}", error=f"not a saved call: {e}"))
    return out


def read_evidence(path: str | Path) -> list[EvidenceEntry] | None:
    """The saved calls of an evidence store (a directory) or a bundle, in order; None when
    ``path`` is neither (a single saved call, read as before)."""
    p = Path(path).expanduser()
    if p.is_dir():
        return EvidenceStore(p).entries()
    try:
        with p.open("rb") as f:
            head = f.read(MAX_INPUT_BYTES + 1)
    except OSError:
        return None  # the single-call reader reports it
    if len(head) > MAX_INPUT_BYTES:
        return None
    return parse_bundle(head, str(path))


class EvidenceStore:
    """A directory of saved calls (see the module doc), created on first use."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser()

    def path_for(self, receipt_id: str) -> Path:
        if not is_receipt_id(receipt_id):
            raise ValueError(f"{receipt_id!r} is not a receipt id")
        return self.directory / f"{receipt_id}.json"

    def has(self, receipt_id: str) -> bool:
        """Whether a call with this receipt is already kept (a replay, for a new call)."""
        return self.path_for(receipt_id).exists()

    def save(self, receipt_id: str, call: Mapping[str, object]) -> Path:
        """Keep one verified call, durably; refuses to replace one already kept."""
        path = self.path_for(receipt_id)
        if path.exists():
            raise FileExistsError(f"{path} is already kept")
        write_atomic(path, (json.dumps(call, indent=2, ensure_ascii=False, allow_nan=False)
                            + "\n").encode(), mode=0o600)  # arguments and results are private
        return path

    def files(self) -> list[Path]:
        """The saved calls, by name (temporary files of a write in progress start with a dot)."""
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.glob("*.json")
                      if not p.name.startswith(".") and p.is_file())

    def entries(self) -> list[EvidenceEntry]:
        out = []
        for p in self.files():
            try:
                out.append(EvidenceEntry(str(p), parse_input_json(p.read_bytes())))
            except (OSError, JsonError) as e:
                out.append(EvidenceEntry(str(p), error=f"cannot read it: {e}"))
        return out

    def export_bundle(self, out: str | Path) -> int:
        """Write every kept call to one bundle file (atomically); how many it holds."""
        docs = []
        for entry in self.entries():
            if entry.error is not None:
                raise VerifierInputError(f"{entry.source}: {entry.error}")
            docs.append(entry.doc)
        write_atomic(Path(out).expanduser(), bundle_text(docs).encode(), mode=0o600)
        return len(docs)

"""``notary hash`` against a JavaScript JCS, byte for byte, on records full of traps.

The rs-tool-call/1 SDKs hash the same records in Node, so Python's canonical bytes must be
exactly what npm ``canonicalize`` (RFC 8785) writes for ``JSON.parse`` of the same text: keys
sorted by UTF-16 code units (astral characters sort by their surrogates, integer-like keys as
strings), ECMAScript number formatting, U+2028/U+2029 and other characters written raw, and
``structuredContent`` of every JSON type (MCP 2026-07-28), ``null`` included and hashed, absent
left out. Inputs JavaScript would silently change (2^53+1, lone surrogates, NaN) are refused by
``notary hash``; Node is not consulted for those, since it would hash a different value.

Needs ``node`` (and ``npm`` unless ``js/node_modules`` has ``canonicalize``): without them the
test fails with what to install, it is never skipped.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from notary.core.records import record_from_json
from tests.node_tools import node_binary, npm_package
from tests.notary_server import run_cli

SALT = "5f0c4ab1d3a0b2e4c6f8091a2b3c4d5e"

# Object keys that JCS must order by UTF-16 code units: "😀" (U+1F600, surrogates D83D DE00)
# sorts before "ﬁ" (U+FB01) although its code point is larger; integer-like keys sort as
# strings ("10" < "2"), unlike JavaScript's own property order for such keys.
TRAP_KEYS = ('"10"', '"2"', '"1"', '""', '"a"', '"A"', '"_"', '"\\u00e9"', '"\\ud83d\\ude00"',
             '"\\ufb01"', '"\\u20ac"', '"\\u0080"', '"\\ud800\\udc00"', '"z\\u2028"')

# Number literals whose ECMAScript spelling differs from the text (or is easy to get wrong).
TRAP_NUMBERS = ("1E21", "1e+21", "1e21", "123456789012345680000", "1e-7", "0.000001",
                "1e-6", "-0", "-0.0", "0.1", "0.30000000000000004", "5e-324",
                "1.7976931348623157e308", "9007199254740991", "-9007199254740991",
                "9007199254740992", "1000000000000000000", "1152921504606846976",
                "35818508739113130", "4.35", "2.5e-5", "100", "1.0", "-1.5E+3", "333333333.3333333")

TRAP_STRINGS = ('"line\\u2028sep\\u2029para"', '"\\u0000\\u0001\\u001f\\u007f"',
                '"quote\\" backslash\\\\ slash\\/"', '"\\b\\f\\n\\r\\t"', '"caf\\u00e9 \\u20ac"',
                '"\\ud83d\\ude00 astral"', '"</script>"', '"\\ufeffbom"', '"\\u00ad\\u200b"')

STRUCTURED = {
    "object": '{"z": 1, "a": {"10": true, "2": false}}',
    "array": '[3, "two", {"b": null, "a": []}, [], 1e21]',
    "string": '"\\u2028 a string root"',
    "number": "1E-7",
    "integer": "9007199254740991",
    "true": "true",
    "false": "false",
    "null": "null",
    "empty_object": "{}",
    "absent": None,
}


def _arguments() -> str:
    keyed = ", ".join(f"{k}: {i}" for i, k in enumerate(TRAP_KEYS))
    numbers = ", ".join(TRAP_NUMBERS)
    strings = ", ".join(TRAP_STRINGS)
    nested = "{" + ", ".join(f"{k}: {{{k}: [{k}]}}" for k in TRAP_KEYS[:5]) + "}"
    return (f'{{"keys": {{{keyed}}}, "numbers": [{numbers}], "strings": [{strings}], '
            f'"nested": {nested}, {TRAP_KEYS[8]}: "astral key at the top", "deep": '
            + "[" * 40 + "0" + "]" * 40 + "}")


def _record_text(structured: str | None, is_error: bool | None) -> str:
    result = '{"content": [{"type": "text", "text": "r\\u2028"}]'
    if structured is not None:
        result += f', "structuredContent": {structured}'
    if is_error is not None:
        result += f', "isError": {json.dumps(is_error)}'
    result += "}"
    return (f'{{"spec": "rs-tool-call/1", "server": "s\\u00e9rver", "tool": "t\\ud83d\\ude00", '
            f'"arguments": {_arguments()}, "result": {result}, "salt": "{SALT}"}}')


RECORDS = {f"structured_{name}": _record_text(value, None) for name, value in STRUCTURED.items()}
RECORDS["is_error_true"] = _record_text("null", True)
RECORDS["is_error_false"] = _record_text(None, False)

# Each one refused with the path of the offending value.
REFUSED = {
    "beyond_2_53": ('"arguments": {"n": 9007199254740993}', "$.arguments.n", "2^53"),
    "lone_high_surrogate": ('"arguments": {"s": "a\\ud800b"}', "$.arguments.s", "surrogate"),
    "lone_low_surrogate_key": ('"arguments": {"\\udc00": 1}', "$.arguments", "surrogate"),
    "lone_surrogate_in_structured": (
        '"arguments": {}, "result": {"content": [], "structuredContent": ["\\udbff"]}',
        "$.result.structuredContent[0]", "surrogate"),
    # NaN is not JSON at all: the bounded input parser refuses the file before any path exists.
    "nan": ('"arguments": {"x": NaN}', "cannot read", "NaN is not a JSON value"),
    "infinity": ('"arguments": {"x": 1e400}', "$.arguments.x", "inf"),
}

_NODE_SCRIPT = r"""
const { createHash } = require("node:crypto");
const { readFileSync } = require("node:fs");
const { pathToFileURL } = require("node:url");
(async () => {
  const mod = await import(pathToFileURL(process.argv[1]).href);
  const canonicalize = typeof mod.default === "function" ? mod.default
    : (mod.default && mod.default.canonicalize) || mod.canonicalize;
  const out = {};
  for (const file of process.argv.slice(2)) {
    const bytes = Buffer.from(canonicalize(JSON.parse(readFileSync(file, "utf8"))), "utf8");
    out[file] = { canonical: bytes.toString("base64"),
                  sha256: createHash("sha256").update(bytes).digest("hex") };
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
"""


def _canonicalize_entry(package: Path) -> Path:
    manifest = json.loads((package / "package.json").read_text())
    exports = manifest.get("exports")
    entry = manifest.get("main", "lib/canonicalize.js")
    if isinstance(exports, dict):
        dot = exports.get(".", exports)
        if isinstance(dot, dict):
            entry = dot.get("import") or dot.get("default") or dot.get("require") or entry
        elif isinstance(dot, str):
            entry = dot
    return package / entry


@pytest.fixture(scope="module")
def node_jcs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The entry module of npm ``canonicalize`` (fails, never skips, without Node)."""
    return _canonicalize_entry(npm_package("canonicalize", "2", tmp_path_factory.mktemp("npm")))


def _node_hashes(entry: Path, files: list[Path]) -> dict[str, dict[str, str]]:
    proc = subprocess.run([node_binary(), "-e", _NODE_SCRIPT, str(entry), *map(str, files)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, dict[str, str]] = json.loads(proc.stdout)
    return result


def test_notary_hash_equals_javascript_jcs_byte_for_byte(node_jcs: Path, tmp_path: Path) -> None:
    files = []
    for name, text in RECORDS.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        files.append(path)
    node = _node_hashes(node_jcs, files)
    for path in files:
        code, out = run_cli("hash", str(path))
        assert code == 0, (path.name, out)
        digest = out.strip()
        js = node[str(path)]
        record = record_from_json(json.loads(path.read_text(encoding="utf-8")))
        ours = record.canonical_bytes()
        theirs = base64.b64decode(js["canonical"])
        assert ours == theirs, (path.name, ours[:200], theirs[:200])
        assert digest == js["sha256"] == hashlib.sha256(ours).hexdigest(), path.name
    # The traps are really in there: present-null and absent differ, and so do the types.
    assert len({node[str(p)]["sha256"] for p in files}) == len(files)
    null = base64.b64decode(node[str(tmp_path / "structured_null.json")]["canonical"])
    absent = base64.b64decode(node[str(tmp_path / "structured_absent.json")]["canonical"])
    assert b'"structuredContent":null' in null and b"structuredContent" not in absent
    assert "\u2028".encode() in null and b"1e+21" in null and b"\\u2028" not in null


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_notary_hash_refuses_what_javascript_would_change(name: str, tmp_path: Path) -> None:
    members, path, problem = REFUSED[name]
    text = (f'{{"server": "s", "tool": "t", {members}, "salt": "{SALT}"' +
            ('' if '"result"' in members else ', "result": {"content": []}') + "}")
    record = tmp_path / f"{name}.json"
    record.write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "notary.cli.main", "hash", str(record)],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert path in proc.stderr and problem.lower() in proc.stderr.lower(), proc.stderr


"""The walkthrough (README.md, then docs/walkthrough.md), run as written in a fresh copy of the
repository; and every other command block of the docs marked as an example.

Every block after a ``<!-- walkthrough -->`` marker is run, in the order of ``PAGES`` and of each
page, as one bash script in a throwaway git repository holding the tracked files of this one; a
``<!-- walkthrough:python PATH -->`` block is written to PATH and run twice (the README says it
can be). Then ``git status`` there must show nothing: whatever the walkthrough writes lands in
ignored places. Two substitutions only, so the test neither reinstalls the shared virtualenv nor
takes a fixed port: ``./scripts/serve`` becomes the ``notary serve`` it execs (with the venv of
this checkout linked in), and each loopback port (8080, the witnesses') a free one. ``HOME``
and ``XDG_STATE_HOME`` point into the temporary directory, and nothing may land there: the
verifier's and the monitor's state files are in ``scratch/`` too, as the walkthrough says.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from tests.doc_blocks import WALKTHROUGH, doc_pages, shell_blocks
from tests.notary_server import free_port

REPO = Path(__file__).resolve().parents[2]
# The pages that hold walkthrough blocks, in the order they run: the README starts the notary,
# docs/walkthrough.md continues in the same shell and stops it.
PAGES = ("README.md", "docs/walkthrough.md")
BLOCK = re.compile(r"<!-- walkthrough(?::python (?P<path>\S+))? -->\n```(?P<lang>\w+)\n"
                   r"(?P<body>.*?)\n```", re.S)


def walkthrough(readme: str, port: int) -> str:
    """The walkthrough as one bash script (with the two substitutions: port 8080 becomes
    ``port``, every other loopback port a free one)."""
    # On a failure, stop what the script started, so the test ends now, not at its timeout.
    parts = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for m in BLOCK.finditer(readme):
        body = m.group("body")
        if m.group("path"):
            assert m.group("lang") == "python"
            path = m.group("path")
            parts.append(f"cat > {path} <<'PYTHON_BLOCK'\n{body}\nPYTHON_BLOCK")
            parts += [f".venv/bin/python {path}"] * 2
        else:
            assert m.group("lang") == "sh", m.group(0)[:80]
            parts.append(body)
    script = "\n".join(parts) + "\n"
    assert script.index("./scripts/serve &") < script.index("curl"), "the README starts it"
    script = script.replace("./scripts/serve", ".venv/bin/notary serve --listen 127.0.0.1:8080")
    ports = {"8080": str(port)}
    for number in sorted(set(re.findall(r"127\.0\.0\.1:(\d+)\b", script)) - {"8080"}):
        ports[number] = str(free_port())
    return re.sub(r"127\.0\.0\.1:(\d+)\b", lambda m: f"127.0.0.1:{ports[m.group(1)]}", script)


def fresh_copy(tmp_path: Path) -> Path:
    """A git repository with the tracked files of this work tree, committed."""
    clone = tmp_path / "clone"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if not src.exists():  # deleted in the work tree, not yet committed
            continue
        dst = clone / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    git = ["git", "-c", "user.name=walkthrough", "-c", "user.email=walkthrough@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=clone, check=True)
    subprocess.run([*git, "add", "-A"], cwd=clone, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fresh clone"], cwd=clone, check=True)
    (clone / ".venv").symlink_to(REPO / ".venv")  # ignored by .gitignore, like a real .venv
    return clone


def test_readme_walkthrough_runs_and_leaves_the_work_tree_clean(tmp_path: Path) -> None:
    port = free_port()
    clone = fresh_copy(tmp_path)
    script = walkthrough("\n".join((clone / page).read_text() for page in PAGES), port)
    assert "scratch/" in script and "git status --short" in script
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTARY_")}
    env.update(HOME=str(tmp_path / "home"), XDG_STATE_HOME=str(tmp_path / "state"),
               PYTHONUNBUFFERED="1")
    # As in a fresh clone: no virtualenv's bin/ on PATH (./scripts/test may have one there).
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not (Path(p) / "notary").exists())
    proc = subprocess.Popen(["bash", "-c", script], cwd=clone, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):  # a notary the script did not stop
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out[-6000:]
    # What the walkthrough shows did happen.
    assert "all results verified" in out
    # The first run's banner names the command as this shell can call it (not on PATH).
    assert "Create an API key: .venv/bin/notary apikey create" in out, out[:3000]
    assert "VALID: every required level passed." in out
    assert "refused: notary-data has moved on" in out and "moved on since this backup" in out
    assert "refused: the notary is serving notary-data" in out and "stop it first" in out
    # The SDK server of the walkthrough: notarized, verified, its client closed (twice).
    assert out.count("forecast: VALID") == 2, out[-6000:]
    assert "Unclosed" not in out and "Exception ignored" not in out, out[-6000:]
    # Post-quantum: the receipt upgraded into the checkpoint both ML-DSA-44 witnesses cosigned,
    # then verified offline from the saved receipt, and the log monitored under that key alone.
    assert out.count("2 of 2 witnesses cosigned (pq1, pq2)") == 2, out[-6000:]
    first_seen = re.findall(r"^ok: 127\.0\.0\.1:\d+ size \d+ \(first seen\); audited", out, re.M)
    assert len(first_seen) == 2, first_seen  # the first monitor run, and the one under LOG_PQ
    runs = re.findall(r"appended (\d+) and \[(\d+), (\d+)\]; size (\d+)", out)
    assert len(runs) == 2 and int(runs[1][0]) == int(runs[0][3]), runs  # twice, one log
    assert (clone / "scratch" / "gateway-state.salt").exists()
    assert not (clone / "examples" / "gateway-policy.toml.salt").exists()
    status = subprocess.run(["git", "status", "--porcelain", "--ignored=no"], cwd=clone,
                            capture_output=True, text=True, check=True).stdout
    assert status == "", status
    # The moved-aside directory of the in-place restore holds the log's private key: no
    # `git add .` takes it, nor any other key the walkthrough wrote.
    aside = list(clone.glob("notary-data.replaced-*"))
    assert len(aside) == 1 and (aside[0] / "log.key").exists(), aside
    addable = subprocess.run(["git", "add", "--dry-run", "-A"], cwd=clone, capture_output=True,
                             text=True, check=True).stdout
    assert addable == "", addable
    keys = [str(p.relative_to(clone)) for p in clone.rglob("*.key")
            if ".venv" not in p.parts and "node_modules" not in p.parts]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=clone,
                             input="\n".join(keys), capture_output=True, text=True).stdout
    assert sorted(ignored.split()) == sorted(keys), set(keys) - set(ignored.split())
    # Nothing outside the clone: the verifier's and the monitor's state are in scratch/.
    written = [str(f) for d in ("home", "state") for f in (tmp_path / d).rglob("*")]
    assert written == [], written
    assert (clone / "scratch" / "verifier-state.json").exists()
    assert (clone / "scratch" / "monitor-state.json").exists()


def test_walkthrough_blocks_live_only_in_the_pages_that_run() -> None:
    """A walkthrough block on any other page would silently never run."""
    for page in doc_pages():
        if str(page.relative_to(REPO)) not in PAGES:
            lines = page.read_text().splitlines()
            assert not any(WALKTHROUGH.fullmatch(line.strip()) for line in lines), page


def test_every_shell_block_runs_or_is_marked_as_an_example() -> None:
    """Every shell block (sh, bash, shell, console; fenced with ``` or ~~~, indented or not) of
    the README and docs/ is run by the walkthrough above, is a verbatim copy of a block it runs,
    or is preceded by ``<!-- example -->``: a reader can tell what the tests ran as written,
    and ``python -m tests.doc_blocks`` lists the rest for the hand check before a release."""
    shell = shell_blocks(REPO)
    ran = {b.body for b in shell if b.is_walkthrough}
    assert len(ran) >= 8, "the walkthrough's blocks are found"
    unmarked = [b.where for b in shell
                if not (b.is_walkthrough or b.is_example or b.body in ran)]
    assert unmarked == [], unmarked
    # Each walkthrough marker is followed by the block the walkthrough runs.
    for page in PAGES:
        text = (REPO / page).read_text()
        assert text.count("<!-- walkthrough") == len(BLOCK.findall(text)), page


def test_the_release_checklist_lists_every_example_block_and_flags_unmarked_ones(
        tmp_path: Path) -> None:
    """``python -m tests.doc_blocks`` prints one line per example block (the hand check before
    a release) and exits 1, naming it, for a shell block that is neither run nor marked."""
    listing = subprocess.run([sys.executable, "-m", "tests.doc_blocks"], cwd=REPO,
                             capture_output=True, text=True, env={**os.environ,
                             "PYTHONPATH": str(REPO)})
    assert listing.returncode == 0, listing.stdout + listing.stderr
    shell = shell_blocks(REPO)
    ran = {b.body for b in shell if b.is_walkthrough}
    examples = [b for b in shell if b.is_example and b.body not in ran]
    assert re.findall(r"^\[ \] (\S+)  ", listing.stdout, re.M) == [b.where for b in examples]
    assert len(listing.stdout.splitlines()) == len(examples)
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("<!-- example -->\n```sh\nls\n```\n")
    (tmp_path / "docs" / "page.md").write_text("Run:\n\n  ~~~bash\n  rm -rf scratch\n  ~~~\n")
    found = [(b.where.split(":")[-1], b.is_example) for b in shell_blocks(tmp_path)]
    assert found == [("2", True), ("3", False)], found


def test_readme_is_a_front_door() -> None:
    """The README stays short (what it is, the two commands, curl, pip, where next) and every
    page its map names exists."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "./scripts/serve" in text and "./scripts/test" in text
    assert re.findall(r"\]\((docs/[^)#]+)", text)


"""``notary serve`` checks the database before it creates anything in ``--data``: a frontend
joining an existing PostgreSQL log without its key is told to copy ``log.key`` and changes no
file; a start that fails (database unreachable, asyncpg missing, a store without its key)
leaves the data directory exactly as it was, with no "Created a new notary" and no traceback;
a start on a port another notary holds fails (and the test harness does not take the other
notary's answer for its own)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from ledger.core.note import Ed25519Signer
from ledger.process.keyfile import write_secret
from tests.notary_server import REPO_ROOT, NotaryProcess, NotaryStartError, _child_env, free_port

BLOCK_ASYNCPG = """
import sys
class _NoAsyncpg:
    def find_spec(self, name, path=None, target=None):
        if name == "asyncpg" or name.startswith("asyncpg."):
            raise ModuleNotFoundError("No module named 'asyncpg'", name="asyncpg")
        return None
sys.meta_path.insert(0, _NoAsyncpg())
from notary.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def serve(data: Path, *args: str, prelude: str | None = None, timeout: float = 120.0
          ) -> subprocess.CompletedProcess[str]:
    """``notary serve`` that is expected to refuse to start (a hang fails the test)."""
    head = ["-c", prelude] if prelude else ["-m", "notary.cli.main"]
    return subprocess.run(
        [sys.executable, *head, "serve", "--data", str(data),
         "--listen", f"127.0.0.1:{free_port()}", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=_child_env(None),
        stdin=subprocess.DEVNULL, check=False)


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mode, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def assert_refused(got: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert got.returncode == 2, (got.returncode, got.stdout, got.stderr)
    assert "Traceback" not in got.stderr, got.stderr
    assert "Created a new notary" not in got.stdout, got.stdout
    for needle in needles:
        assert needle in got.stderr, got.stderr


def test_a_frontend_joining_a_postgresql_log_without_its_key_changes_nothing(
        tmp_path: Path, pg_url: str) -> None:
    with NotaryProcess(tmp_path / "a", args=("--database", pg_url)) as first:
        a = first.data_dir
        assert not (a / "notary.store.sqlite").exists()  # accounts live in PostgreSQL
        # The likeliest mistake: log.vkey copied, log.key forgotten.
        b = tmp_path / "b"
        b.mkdir(mode=0o700)
        shutil.copy2(a / "log.vkey", b / "log.vkey")
        before = tree(b)
        assert_refused(serve(b, "--database", pg_url), "copy log.key", "nothing was changed")
        assert tree(b) == before
        # Nothing copied at all: the data directory is not even created.
        c = tmp_path / "c"
        assert_refused(serve(c, "--database", pg_url), "already holds the log", "copy log.key")
        assert not c.exists()
        # Another log's key: refused as well, before it signs anything.
        d = tmp_path / "d"
        d.mkdir(mode=0o700)
        write_secret(d / "log.key", Ed25519Signer.generate("127.0.0.1").private_key_text())
        before = tree(d)
        assert_refused(serve(d, "--database", pg_url), "does not sign", "copy log.key")
        assert tree(d) == before
        # With the key copied too, it joins the log.
        shutil.copy2(a / "log.key", b / "log.key")
        with NotaryProcess(b, args=("--database", pg_url)) as second:
            assert "Joined the log" in second.log_text()
            assert second.get("/v1/ledger").json()["vkey"] == (a / "log.vkey").read_text().strip()
        assert (b / "log.vkey").read_bytes() == (a / "log.vkey").read_bytes()
        assert not (b / "notary.store.sqlite").exists()


def test_an_unreachable_database_leaves_the_data_directory_as_it_was(tmp_path: Path) -> None:
    url = f"postgresql://127.0.0.1:{free_port()}/notary"  # nothing listens there
    data = tmp_path / "data"
    assert_refused(serve(data, "--database", url), "cannot connect")
    assert not data.exists()


def test_without_asyncpg_a_postgresql_url_says_which_extra_to_install(tmp_path: Path) -> None:
    data = tmp_path / "data"
    got = serve(data, "--database", "postgresql://127.0.0.1:5432/notary", prelude=BLOCK_ASYNCPG)
    assert_refused(got, "pip install 'mcp-notary[postgres]'",
                   "NOTARY_EXTRAS=postgres ./scripts/serve")
    assert not data.exists()


def test_a_sqlite_store_without_its_log_key_is_not_given_a_new_one(tmp_path: Path) -> None:
    with NotaryProcess(tmp_path / "data") as server:
        data = server.data_dir
    (data / "log.key").unlink()
    (data / "log.vkey").unlink()
    before = tree(data)
    assert_refused(serve(data), "log.key is missing", "nothing was changed")
    assert tree(data) == before


def banner_commands(server: NotaryProcess) -> list[list[str]]:
    """Every command the first-run banner suggests: a ``Label: COMMAND`` line of its stdout whose
    COMMAND is this program (``notary``, a path to it, or ``python -m notary.cli.main``)."""
    found = []
    for line in server.log_path.read_text().splitlines():
        _, sep, rest = line.partition(": ")
        if not sep or line.startswith("---") or not rest:
            continue
        words = shlex.split(rest)
        program = words[0]
        if Path(program).name == "notary" or words[1:3] == ["-m", "notary.cli.main"]:
            found.append(words)
    return found


def run_as_printed(server: NotaryProcess, words: list[str], env: dict[str, str] | None
                   ) -> subprocess.CompletedProcess[str]:
    """A suggested command, run as printed: in the server's directory and environment (where
    ``notary`` is on PATH only if it was for the server)."""
    return subprocess.run(words, capture_output=True, text=True, timeout=120,
                          cwd=server.data_dir.parent, env=_child_env(env),
                          stdin=subprocess.DEVNULL, check=False)


@pytest.mark.parametrize("given", ["sqlite", "flag", "environment"])
def test_every_command_the_first_run_banner_suggests_runs_as_printed(
        tmp_path: Path, given: str, request: pytest.FixtureRequest) -> None:
    """SQLite, PostgreSQL by --database, and by NOTARY_DATABASE: the banner's commands succeed
    as printed (``apikey create`` without --database made a key in a store nobody serves)."""
    url = "" if given == "sqlite" else str(request.getfixturevalue("pg_url"))
    args = ("--database", url) if given == "flag" else ()
    env = {"NOTARY_DATABASE": url} if given == "environment" else None
    with NotaryProcess(tmp_path / "data", args=args, env=env, split_stderr=True) as server:
        commands = banner_commands(server)
        assert commands, server.log_text()
        for words in commands:
            got = run_as_printed(server, words, env)
            assert got.returncode == 0, (words, got.stdout, got.stderr)
        key = got.stdout.strip().splitlines()[-1]
        resp = server.post("/v1/tool-calls", api_key=key, json_body={
            "server": "srv", "tool": "t", "call_sha256": "5" * 64})
        assert resp.status == 201, resp.body  # the key is one this service knows


def test_a_database_password_is_never_printed(tmp_path: Path, pg_url: str) -> None:
    """The banner names the database without its password (the test cluster trusts loopback,
    so any password connects)."""
    parts = urlsplit(pg_url)
    user, _, host = parts.netloc.rpartition("@")
    url = urlunsplit(parts._replace(netloc=f"{user or 'postgres'}:s3cret-pw@{host}"))
    with NotaryProcess(tmp_path / "data", args=("--database", url), split_stderr=True) as server:
        printed = [line for line in server.log_path.read_text().splitlines()
                   if not line.startswith("---")]  # the test's own line, with the command
        text = "\n".join(printed) + server.stderr_bytes().decode()
        assert "Create an API key" in text and "--database" in text, text
        assert "s3cret-pw" not in text, text


def test_a_second_serve_on_a_taken_port_fails_and_is_not_taken_for_the_first(
        tmp_path: Path) -> None:
    """The test harness's readiness wait must not accept the answer of another notary on the
    port: ``notary serve`` exits (address in use) and the start fails, or with an automatic
    port, starts again on another one."""
    with NotaryProcess(tmp_path / "first") as first:
        second = NotaryProcess(tmp_path / "second", port=first.port)
        with pytest.raises(NotaryStartError, match=r"(?i)address already in use"):
            second.start()
        moved = NotaryProcess(tmp_path / "third")
        moved.port = first.port  # as if free_port() had handed out the same port twice
        with moved:
            assert moved.port != first.port
            key = first.get("/v1/ledger").json()["vkey"]
            assert moved.get("/v1/ledger").json()["vkey"] != key

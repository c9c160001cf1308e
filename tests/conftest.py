"""Shared fixtures: a real ``notary serve`` subprocess on 127.0.0.1 (see notary_server.py).

- ``notary_server``: a fresh notary (own data directory) per test.
- ``notary_api_key``: an unlimited API key for that server.
- ``notary_factory``: start more notaries with custom flags; all are stopped at teardown.
- ``serve``: serve an aiohttp application in the test's loop (see servers.py); every server it
  started is stopped at teardown.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest
import structlog
from aiohttp import web

from tests.notary_server import NotaryProcess
from tests.pgcluster import Cluster, new_database, start_cluster
from tests.servers import Serve, Served, start_server
from tests.stores import BACKENDS, StoreFactory

pytest_plugins = ["tests.seeding"]  # seeded_rng, and the seed of a failed test in its report

NotaryFactory = Callable[..., NotaryProcess]


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
    structlog.configure(logger_factory=lambda *_: structlog.PrintLogger(_CurrentStderr()),
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

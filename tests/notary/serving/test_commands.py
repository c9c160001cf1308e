"""The commands messages suggest name the store completely (so they run as printed, from any
directory) and never a database password."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from notary.serving.commands import store_command
from notary.serving.config import Settings

PG = "postgresql://notary@db1:5432/notary"


def test_the_store_is_named_completely(tmp_path: Path) -> None:
    data = tmp_path / "my data"
    sqlite = store_command(Settings(data=data), "check", env={})
    assert shlex.split(sqlite) == ["notary", "check", "--data", str(data)]
    pg = store_command(Settings(data=data, database=PG), "apikey create", "--account", "NAME",
                       program="'/opt/py 3/python' -m notary.cli.main", env={})
    assert shlex.split(pg) == ["/opt/py 3/python", "-m", "notary.cli.main", "apikey", "create",
                               "--data", str(data), "--database", PG, "--account", "NAME"]


def test_a_relative_data_directory_is_made_absolute(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    words = shlex.split(store_command(Settings(data=Path("notary-data")), "check", env={}))
    assert words[-1] == str(tmp_path / "notary-data")


def test_a_database_the_environment_gives_is_left_to_it() -> None:
    got = store_command(Settings(database=PG), "check", env={"NOTARY_DATABASE": PG})
    assert "--database" not in got


def test_a_password_is_never_shown() -> None:
    for url in ("postgresql://notary:s3cret-pw@db1/notary",
                "postgresql://notary:s3cret-pw@h1:5432,h2:5433/notary",
                "postgresql://notary@db1/notary?password=s3cret-pw"):
        got = store_command(Settings(database=url), "check", env={})
        assert "s3cret-pw" not in got and "--database" in got, got

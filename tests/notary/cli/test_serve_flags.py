"""``notary serve``'s flags are the settings table's: one per setting that has one, named and
typed by its row, and absent unless given, so the environment and the TOML file still apply."""

from __future__ import annotations

import argparse

import pytest

from notary.cli.main import build_parser
from notary.cli.store_args import settings
from notary.serving.config import SETTINGS


def _serve() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["serve"]


def test_every_flag_is_a_row_of_the_table_and_every_row_with_a_flag_is_one() -> None:
    options = {o: a for a in _serve()._actions for o in a.option_strings}
    table = {row.flag: row for row in SETTINGS if row.flag is not None}
    assert set(options) - set(table) == {"-h", "--help", "--config", "--listen-fd"}
    assert set(table) <= set(options)
    for flag, row in table.items():
        action = options[flag]
        assert (action.dest, action.default) == (row.name, None), flag
        assert list(action.choices or ()) == list(row.choices), flag
        if row.default_text:
            assert action.help is not None and action.help.endswith(
                f"(default: {row.default_text})"), flag


def test_flags_are_typed_and_repeatable_as_their_rows_say() -> None:
    args = build_parser().parse_args([
        "serve", "--max-body", "2048", "--header-timeout", "2", "--data", "d",
        "--witness", "http://a=K1", "--witness", "http://b=K2"])
    assert args.max_body == 2048 and isinstance(args.max_body, int)
    assert args.header_timeout == 2.0 and isinstance(args.header_timeout, float)
    assert str(args.data) == "d" and not isinstance(args.data, str)
    assert args.witnesses == ["http://a=K1", "http://b=K2"]
    assert args.listen is None and args.mirrors is None  # not given: left to env, TOML, default


def test_a_flag_beats_the_environment_which_beats_the_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTARY_CONFIG", raising=False)
    monkeypatch.setenv("NOTARY_LOG_LEVEL", "debug")
    parse = build_parser().parse_args
    assert settings(parse(["serve", "--log-level", "warning"])).log_level == "warning"
    chosen = settings(parse(["serve"]))
    assert (chosen.log_level, chosen.max_batch) == ("debug", 4096)

"""docs/configuration.md is generated from the settings table (``notary.serving.config``): the
committed page must be what the generator writes today, and its example file one that
``notary serve`` accepts and that changes what it says it changes."""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path

import pytest

from notary.serving.config import Settings, resolve
from notary.serving.config_page import COMMAND, render

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "configuration.md"


def test_the_committed_page_is_the_generated_one() -> None:
    committed, generated = PAGE.read_text(), render()
    if committed != generated:
        diff = difflib.unified_diff(committed.splitlines(), generated.splitlines(),
                                    "docs/configuration.md (committed)", "(generated)",
                                    lineterm="", n=1)
        pytest.fail(f"docs/configuration.md is not what the settings table gives: regenerate it "
                    f"with `{COMMAND}`\n" + "\n".join(list(diff)[:40]))


def test_the_example_file_is_accepted_and_sets_what_it_names(tmp_path: Path) -> None:
    found = re.search(r"^```toml\n(.*?)^```$", render(), re.S | re.M)
    assert found, "the page shows no example TOML file"
    example = tmp_path / "notary.toml"
    example.write_text(found.group(1))
    settings = resolve({}, env={}, config_file=example)
    defaults = Settings()
    for key in tomllib.loads(found.group(1)):
        name = key.replace("-", "_")
        assert getattr(settings, name) != getattr(defaults, name), key

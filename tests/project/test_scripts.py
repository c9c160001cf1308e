"""``scripts/_env.sh``: one install stamp for ``./scripts/serve`` and ``./scripts/test``.

Run against a copy of the script in a throwaway root whose ``.venv/bin/python`` is a stub that
records each call, so what would be installed is visible without installing anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "clone"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "_env.sh", root / "scripts" / "_env.sh")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    stub = bin_dir / "python"
    stub.write_text(f"#!/bin/sh\necho \"$*\" >> {root / 'calls.log'}\n")
    stub.chmod(0o755)
    return root


def _source(root: Path, extras: str) -> list[str]:
    """Source _env.sh as scripts/serve (no extras) or scripts/test (``test``) do; pip calls."""
    log = root / "calls.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "NOTARY_EXTRAS": extras}
    subprocess.run(["bash", "-c", f"source {root / 'scripts' / '_env.sh'}"], env=env,
                   check=True, capture_output=True)
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if "install" in line and "-e" in line]


def test_one_stamp_for_serve_and_test(tmp_path: Path) -> None:
    root = _root(tmp_path)
    assert len(installs := _source(root, "test")) == 1 and installs[0].endswith("[test]")
    assert (root / ".venv" / ".installed").read_text() == "test"
    assert _source(root, "") == []          # ./scripts/serve after ./scripts/test: nothing
    assert _source(root, "test") == []      # and ./scripts/test again: nothing
    os.utime(root / "pyproject.toml", (2**31, 2**31))  # pyproject.toml changed since
    assert len(installs := _source(root, "")) == 1 and installs[0].endswith("[test]")


def test_serve_first_then_test_adds_only_the_extras(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / ".venv" / ".installed-test").write_text("")  # an earlier script's stamp
    assert len(installs := _source(root, "")) == 1 and installs[0].endswith(str(root))
    assert not (root / ".venv" / ".installed-test").exists()
    assert _source(root, "") == []
    assert len(installs := _source(root, "test")) == 1 and installs[0].endswith("[test]")
    assert _source(root, "") == [] and _source(root, "test") == []

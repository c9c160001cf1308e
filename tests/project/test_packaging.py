"""Both packages as a stranger gets them, proved without a registry.

Python: the sdist is built from a copy of the repository's files, and the wheel from the sdist
(``python -m build --no-isolation``, so a file the sdist lacks is missing from the wheel too);
both pass ``twine check --strict``; the wheel holds the explorer's assets,
the OpenAPI document and the AER-1 schema; installed into a fresh virtualenv, away from any
clone, its ``notary`` answers ``--version``, verifies a saved call offline (and refuses a
changed one), and serves ``/healthz``, ``/openapi.json`` and the explorer. No index is used:
the fresh environment sees only the distributions the wheel's ``Requires-Dist`` names, and
theirs, taken from this virtualenv (linked file by file, so nothing else is importable), and
``pip check`` there confirms every declared requirement is met. So a dependency the code
imports but the metadata forgets fails here, as it would for a user.

JavaScript: ``npm pack``'s tarball is installed into an empty project with ``npm install
--offline``, beside tarballs of its dependencies packed from ``js/node_modules`` (the versions the
lock file pins); npm resolves the package's declared ranges against them, and would have to ask
the registry (refused: offline) for anything else. Its CLI and its library then verify the saved
call, and refuse the changed one.
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ledger.process.version import __version__
from tests.node_tools import node_binary
from tests.notary_server import LiveNotary, free_port

REPO = Path(__file__).resolve().parents[2]
ASSETS = ("notary/openapi.json", "notary/aer-1-receipt.schema.json",
          "notary/http/explorer/index.html")
"""Package data the wheel must hold, besides every file of ``notary/http/explorer/assets``."""


def _run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def _source_copy(dest: Path) -> Path:
    """The repository's files (tracked, and new ones git does not ignore) copied to ``dest``:
    the build sees what a clean checkout holds, and writes nothing into this work tree."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The built wheel and sdist, by kind."""
    tmp = tmp_path_factory.mktemp("build")
    source = _source_copy(tmp / "source")
    out = tmp / "dist"
    built = _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source,
                 cwd=tmp, timeout=300)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(z.read(name).decode())


def test_wheel_and_sdist_pass_twine_and_hold_the_assets(dists: dict[str, Path]) -> None:
    checked = _run(sys.executable, "-m", "twine", "check", "--strict", dists["wheel"],
                   dists["sdist"], cwd=dists["wheel"].parent)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout
    with zipfile.ZipFile(dists["wheel"]) as z:
        names = set(z.namelist())
        entry_points = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assets = [p.relative_to(REPO).as_posix()
              for p in (REPO / "notary/http/explorer/assets").iterdir()]
    assert assets, "the explorer has no built assets"
    missing = [a for a in (*ASSETS, *assets) if a not in names]
    assert missing == [], f"the wheel lacks {missing}"
    assert "notary = notary.cli.main:main" in entry_points
    assert "ledger = ledger.cli.main:main" in entry_points
    meta = _metadata(dists["wheel"])
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert (meta["Name"], meta["Version"]) == (project["name"], project["version"])
    assert meta["Version"] == __version__, "ledger/process/version.py and pyproject.toml differ"
    assert meta["License-Expression"] == "Apache-2.0"
    with tarfile.open(dists["sdist"]) as t:
        in_sdist = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert [a for a in (*ASSETS, *assets, "LICENSE", "README.md", "pyproject.toml")
            if a not in in_sdist] == []


def _declared_closure(requirements: list[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions that ``requirements`` (Requires-Dist lines) name, with
    their own requirements, markers and extras evaluated for this interpreter."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [(r, "") for r in requirements]
    while todo:
        line, extra = todo.pop()
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        key = canonicalize_name(req.name)
        if key in found:
            continue
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{req.name} (required as {line!r}) is not installed in this venv")
        found[key] = dist
        todo += [(sub, e) for sub in dist.requires or [] for e in ("", *req.extras)]
    return list(found.values())


def _link_distributions(dists: list[importlib.metadata.Distribution], dest: Path) -> None:
    """Each distribution's installed files (its RECORD) linked one by one under ``dest``."""
    for dist in dists:
        base = Path(str(dist.locate_file("")))
        for f in dist.files or []:
            if f.parts[0] == "..":  # console scripts, outside site-packages
                continue
            target = dest / f
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(base / f)


@pytest.fixture(scope="module")
def fresh_venv(dists: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with the wheel installed and nothing of this clone: its bin directory."""
    tmp = tmp_path_factory.mktemp("fresh")
    venv = tmp / "venv"
    assert _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp).returncode == 0
    deps = tmp / "declared-deps"
    _link_distributions(_declared_closure(_metadata(dists["wheel"]).get_all("Requires-Dist")
                                          or []), deps)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "declared-deps.pth").write_text(f"{deps}\n")
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python"]
    installed = _run(*pip, "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                     dists["wheel"], cwd=tmp)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    checked = _run(*pip, "check", "--disable-pip-version-check", cwd=tmp)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return venv / "bin"


def _stranger_env(home: Path) -> dict[str, str]:
    """An environment that points at no clone: no PYTHONPATH, a home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return {**env, "HOME": str(home), "XDG_STATE_HOME": str(home / "state")}


async def _saved_calls(notary: LiveNotary, where: Path) -> tuple[Path, Path, list[str]]:
    """A notarized call saved to a file, the same call with its result changed, and the trust
    flags (a JWKS file and the log key) that verify it offline."""
    call = await notary.notarize(x=1)
    good = where / "call.json"
    good.write_text(json.dumps(call.saved))
    changed = json.loads(json.dumps(call.saved))
    changed["result"]["structuredContent"] = {"echo": {"x": 2}}
    bad = where / "changed.json"
    bad.write_text(json.dumps(changed))
    jwks = where / "jwks.json"
    jwks.write_text(json.dumps(notary.jwks_json))
    return good, bad, ["--jwks", str(jwks), "--log-key", notary.vkey]


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read()


@pytest.fixture
def serving(fresh_venv: Path, tmp_path: Path) -> Iterator[str]:
    """``notary serve`` of the fresh virtualenv on a loopback port: its URL once /healthz
    answers 200."""
    port = free_port()
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen([fresh_venv / "notary", "serve", "--data", tmp_path / "data",
                             "--listen", f"127.0.0.1:{port}"], cwd=home,
                            env=_stranger_env(home), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                if _get(url + "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                stderr = proc.stderr.read().decode() if proc.stderr else ""
                pytest.fail(f"the fresh notary serve did not answer /healthz:\n{stderr}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


async def test_the_wheel_installs_alone_and_its_commands_work(
        fresh_venv: Path, notary: LiveNotary, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = _stranger_env(home)
    where = _run(fresh_venv / "python", "-c", "import notary; print(notary.__file__)",
                 cwd=home, env=env)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(fresh_venv.parent), where.stdout
    version = _run(fresh_venv / "notary", "--version", cwd=home, env=env)
    assert (version.returncode, version.stdout.strip()) == (0, f"notary {__version__}")
    good, bad, trust = await _saved_calls(notary, tmp_path)
    ok = _run(fresh_venv / "notary", "verify", good, *trust, "--offline", "--no-state",
              cwd=home, env=env)
    assert ok.returncode == 0 and "VALID" in ok.stdout, ok.stdout + ok.stderr
    refused = _run(fresh_venv / "notary", "verify", bad, *trust, "--offline", "--no-state",
                   cwd=home, env=env)
    assert refused.returncode == 1, refused.stdout + refused.stderr


def test_the_installed_notary_serves_its_api_and_the_explorer(serving: str) -> None:
    status, body = _get(serving + "/openapi.json")
    assert status == 200 and json.loads(body)["openapi"].startswith("3.")
    status, page = _get(serving + "/explorer/")
    assert status == 200
    assets = set(re.findall(r"/explorer/assets/[\w.-]+", page.decode()))
    assert assets, "the explorer page names no assets"
    for asset in sorted(assets):
        assert _get(serving + asset)[0] == 200, asset


def _dependency_dirs(package: Path) -> list[Path]:
    """The directories of the packages ``package`` depends on (``dependencies``, recursively),
    found as Node finds them from where each is installed."""
    found: dict[Path, None] = {}

    def walk(start: Path, name: str) -> None:
        for d in (start, *start.parents):
            candidate = d / "node_modules" / name
            if (candidate / "package.json").is_file():
                if candidate not in found:
                    found[candidate] = None
                    manifest = json.loads((candidate / "package.json").read_text())
                    for dep in manifest.get("dependencies", {}):
                        walk(candidate, dep)
                return
        pytest.fail(f"{name} is not installed under {package}: run npm ci in js/")

    for dep in json.loads((package / "package.json").read_text()).get("dependencies", {}):
        walk(package, dep)
    return list(found)


async def test_the_npm_tarball_installs_offline_and_verifies(
        notary: LiveNotary, tmp_path: Path) -> None:
    node = node_binary()
    npm = shutil.which("npm")
    assert npm is not None, "this test needs npm (apt-get install npm)"
    js = REPO / "js"
    packs = tmp_path / "tarballs"
    packs.mkdir()
    packed = _run(npm, "pack", "--json", "--pack-destination", packs, js,
                  *_dependency_dirs(js), cwd=tmp_path)
    assert packed.returncode == 0, packed.stderr
    files = {p["name"]: p for p in json.loads(packed.stdout)}
    ours = files["mcp-notary"]
    shipped = {f["path"] for f in ours["files"]}
    assert {"bin/mcp-notary.js", "src/index.js", "types/index.d.ts", "LICENSE",
            "README.md", "package.json"} <= shipped, sorted(shipped)
    assert not any(p.startswith(("test/", "bench/", "node_modules/")) for p in shipped)

    project = tmp_path / "project"
    project.mkdir()
    (project / "package.json").write_text(json.dumps(
        {"name": "empty", "version": "1.0.0", "private": True, "type": "module"}))
    env = {**_stranger_env(tmp_path / "home"), "npm_config_cache": str(tmp_path / "npm-cache")}
    installed = _run(npm, "install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts",
                     *sorted(packs.glob("*.tgz")), cwd=project, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    good, bad, trust = await _saved_calls(notary, tmp_path)
    cli = project / "node_modules" / ".bin" / "mcp-notary"
    ok = _run(cli, "verify", good, *trust, "--offline", "--no-state", cwd=project, env=env)
    assert ok.returncode == 0 and "VALID" in ok.stdout, ok.stdout + ok.stderr
    refused = _run(cli, "verify", bad, *trust, "--offline", "--no-state", cwd=project, env=env)
    assert refused.returncode == 1, refused.stdout + refused.stderr

    script = project / "verify.js"
    script.write_text(
        'import { readFile } from "node:fs/promises";\n'
        'import { makeTrust, verifyToolCall } from "mcp-notary";\n'
        "const [jwks, logKey, ...calls] = process.argv.slice(2);\n"
        'const trust = makeTrust({ jwks: JSON.parse(await readFile(jwks, "utf8")), '
        "logKeys: [logKey] });\n"
        "for (const call of calls) {\n"
        '  const report = await verifyToolCall(await readFile(call, "utf8"), { trust });\n'
        "  console.log(report.valid ? 'valid' : 'invalid');\n"
        "}\n")
    lib = _run(node, script, trust[1], trust[3], good, bad, cwd=project, env=env)
    assert lib.returncode == 0, lib.stdout + lib.stderr
    assert lib.stdout.split() == ["valid", "invalid"], lib.stdout + lib.stderr

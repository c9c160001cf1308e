"""Settings: flags, then environment variables, then a TOML file, then defaults (first wins)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ledger.netaddr import AddressError, parse_host_port
from notary.core.errors import NotaryBaseError


class ConfigError(NotaryBaseError, ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    data: Path = Path("notary-data")
    listen: str = "127.0.0.1:8080"
    public_url: str = ""  # defaults to http://<listen>
    origin: str = ""  # fixed at first run; defaults to the public URL without its scheme
    max_body: int = 64 * 1024
    max_batch: int = 4096
    workers: int = 1  # processes serving the log behind one listening socket (--workers)
    log_format: str = "auto"  # auto (console on a TTY, else JSON), json or console
    log_level: str = "info"
    # Witnessing (ledger/witnessing.py): "URL=VKEY" per witness (a TOML list; in the
    # environment, separated by spaces or commas), cosignatures required (0: a majority),
    # seconds between submissions of a grown tree, and per-request timeout in seconds.
    witnesses: tuple[str, ...] = ()
    witness_quorum: int = 0
    # Or a C2SP tlog-policy file naming the witnesses (with their URLs) and the quorum.
    witness_policy: str = ""
    witness_interval: float = 2.0
    witness_timeout: float = 5.0
    # A directory kept up to date with the log's static tlog-tiles tree ("" for none).
    publish: str = ""
    # Background scrub (ledger/scrub.py): stored tiles and bundles re-verified per second;
    # 0 turns it off.
    scrub_rate: float = 20.0

    @property
    def host_port(self) -> tuple[str, int]:
        try:
            return parse_host_port(self.listen, what="listen", default_host="127.0.0.1")
        except AddressError as e:  # a setting: reported with the other settings' errors
            raise ConfigError(str(e)) from None

    @property
    def base_url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host, port = self.host_port
        return f"http://{host}:{port}"

    @property
    def default_origin(self) -> str:
        return self.origin or self.base_url.split("://", 1)[-1]


_ENV_PREFIX = "NOTARY_"


def _coerce(name: str, value: Any) -> Any:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    try:
        if kind == "Path":
            return Path(value)
        if kind == "int":
            if isinstance(value, bool):
                raise ValueError
            return int(value)
        if kind == "float":
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind == "tuple[str, ...]":
            items = value.replace(",", " ").split() if isinstance(value, str) else value
            if not isinstance(items, list | tuple) or not all(isinstance(v, str) for v in items):
                raise ValueError
            return tuple(items)
        return str(value)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"setting {name!r}: {value!r} is not a valid {kind}") from e


def resolve(flags: Mapping[str, Any], env: Mapping[str, str] | None = None,
            config_file: Path | None = None) -> Settings:
    """Merge the four sources; unknown keys in the TOML file are an error, not ignored."""
    env = os.environ if env is None else env
    names = [f.name for f in fields(Settings)]
    file_values: dict[str, Any] = {}
    path = config_file or (Path(env["NOTARY_CONFIG"]) if env.get("NOTARY_CONFIG") else None)
    if path is not None:
        try:
            raw = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"cannot read config file {path}: {e}") from e
        for key, value in raw.items():
            name = key.replace("-", "_")
            if name not in names:
                raise ConfigError(f"{path}: unknown setting {key!r}")
            file_values[name] = value
    chosen: dict[str, Any] = {}
    for name in names:
        for source in (flags.get(name), env.get(_ENV_PREFIX + name.upper()),
                       file_values.get(name)):
            if source is not None and source != "":
                chosen[name] = _coerce(name, source)
                break
    settings = Settings(**chosen)
    settings.host_port  # noqa: B018 - validate early
    return settings

"""Settings: flags, then environment variables, then a TOML file, then defaults (first wins).

Every setting is checked here and nowhere else (type, range, choice, and the few rules that
join two settings), so a bad value stops ``notary serve`` at start with one message that names
the setting and where its value came from (``--max-body 0``, ``NOTARY_LOG_FORMAT=bogus``,
``notary.toml: witness_quorum = -3``), instead of a limit that silently turns itself off or a
server that refuses every request. :class:`Settings` validates itself too, so code that builds
one directly (tests, embedders) gets the same rules.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ledger.core.note import is_valid_key_name
from ledger.jobs.witnessing import WitnessConfigError, parse_mirror_spec, parse_witness_spec
from ledger.process.netaddr import AddressError, parse_host_port
from notary.core.errors import NotaryBaseError
from notary.store import database_problem, is_postgres


class ConfigError(NotaryBaseError, ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    data: Path = Path("notary-data")
    # The store: "" for the SQLite file in `data` (notary.store.sqlite), "memory:" for a
    # throwaway one that lives as long as the process (tests, demos).
    database: str = ""
    listen: str = "127.0.0.1:8080"
    public_url: str = ""  # defaults to http://<listen>
    origin: str = ""  # fixed at first run; defaults to the public URL without its scheme
    max_body: int = 64 * 1024
    max_batch: int = 4096
    workers: int = 1  # processes serving the log behind one listening socket (--workers)
    log_format: str = "auto"  # auto (console on a TTY, else JSON), json or console
    log_level: str = "info"
    # Witnessing (ledger/jobs/witnessing.py): "URL=VKEY" per witness (a TOML list; in the
    # environment, separated by spaces or commas), cosignatures required (0: a majority),
    # seconds between submissions of a grown tree, and per-request timeout in seconds.
    witnesses: tuple[str, ...] = ()
    witness_quorum: int = 0
    # Or a C2SP tlog-policy file naming the witnesses (with their URLs) and the quorum.
    witness_policy: str = ""
    witness_interval: float = 2.0
    witness_timeout: float = 5.0
    # Mirrors (C2SP tlog-mirror), "URL=VKEY" each like witnesses: pushed every grown checkpoint
    # and its entries by the witnessing job; their cosignatures count like witnesses'.
    mirrors: tuple[str, ...] = ()
    # Connections (ledger/http/server.py): open connections at most (0: derived from
    # RLIMIT_NOFILE, keeping a reserve for the database and files), seconds an idle
    # keep-alive connection stays open, seconds to receive a request's head, and its body.
    max_connections: int = 0
    keepalive_timeout: float = 5.0
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    # POST /v1/tool-calls/verify (notary/http/verify_pool.py): worker processes, verifies that
    # may wait for a worker, verifies in flight per client address, and the worker-seconds
    # per second one client address may use on average.
    verify_workers: int = 1
    verify_queue: int = 8
    verify_per_client: int = 2
    verify_budget: float = 0.5
    # A directory kept up to date with the log's static tlog-tiles tree ("" for none).
    publish: str = ""
    # Background scrub (ledger/jobs/scrub.py): stored tiles and bundles re-verified per second;
    # 0 turns it off.
    scrub_rate: float = 20.0
    # POST /v1/tool-calls on the plain path (ledger/http/server.py), "on", or "off" to serve
    # every request through aiohttp's request objects (to compare; the answers are the same).
    fast_path: str = "on"
    # The log's ML-DSA-44 checkpoint signature beside its Ed25519 one (ledger/log/pq_checkpoints.py;
    # the key is derived from log.key): "on", or "off" for Ed25519-only checkpoints.
    pq_checkpoints: str = "on"

    def __post_init__(self) -> None:
        for f in fields(self):
            problem = _problem(f.name, getattr(self, f.name))
            if problem:
                raise ConfigError(f"setting {f.name}: {problem}")
        cross = _cross_problem({f.name: getattr(self, f.name) for f in fields(self)})
        if cross is not None:
            raise ConfigError(cross[1])

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
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    @property
    def default_origin(self) -> str:
        return self.origin or self.base_url.split("://", 1)[-1]


# --- the rules: one entry per setting ----------------------------------------------------------

Check = Callable[[Any], str | None]
"""A rule: the problem with a value, worded for a person, or None when the value is fine."""


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _between(low: float, high: float, unit: str = "") -> Check:
    suffix = f" {unit}" if unit else ""

    def check(value: Any) -> str | None:
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if not low <= value <= high:
            return f"must be between {_number(low)} and {_number(high)}{suffix}, got {value!r}"
        return None

    return check


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        if value not in choices:
            return f"must be one of {', '.join(choices)}, got {value!r}"
        return None

    return check


def _listen(value: Any) -> str | None:
    try:
        parse_host_port(value, default_host="127.0.0.1")
    except AddressError:
        return f"{value!r} is not HOST:PORT"
    return None


def _public_url(value: Any) -> str | None:
    if value == "":
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return f"{value!r} is not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{value!r} must be an http:// or https:// URL with a host"
    if parts.query or parts.fragment or parts.username is not None:
        return f"{value!r} must not have a query, a fragment or credentials"
    return None


def _origin(value: Any) -> str | None:
    if value and not is_valid_key_name(value):
        return (f"{value!r} is not a valid log origin (non-empty, no spaces, no '+', no "
                "control characters)")
    return None


def _data(value: Any) -> str | None:
    return "must not contain a NUL character" if "\0" in str(value) else None


def _witness_policy(value: Any) -> str | None:
    if value and not Path(value).expanduser().is_file():
        return f"{value!r} is not a readable C2SP tlog-policy file"
    return None


def _witnesses(value: Any) -> str | None:
    for spec in value:
        try:
            parse_witness_spec(spec)
        except WitnessConfigError as e:
            return str(e)
    return None


def _mirrors(value: Any) -> str | None:
    for spec in value:
        try:
            parse_mirror_spec(spec)
        except WitnessConfigError as e:
            return str(e)
    return None


def _database(value: str) -> str | None:
    # The rule's message follows the setting's name: "database 'x' is not supported", once.
    return database_problem(value)


_MIB = 1024 * 1024
_RULES: Mapping[str, Check] = {
    "data": _data,
    "database": _database,
    "listen": _listen,
    "public_url": _public_url,
    "origin": _origin,
    "max_body": _between(1024, 64 * _MIB, "bytes"),
    "max_batch": _between(1, 65536, "entries"),
    "log_format": _one_of("auto", "json", "console"),
    "log_level": _one_of("debug", "info", "warning", "error"),
    "witnesses": _witnesses,
    "witness_quorum": _between(0, 1000),
    "witness_policy": _witness_policy,
    "witness_interval": _between(0.01, 86400, "seconds"),
    "witness_timeout": _between(0.01, 3600, "seconds"),
    "mirrors": _mirrors,
    "max_connections": _between(0, 1_000_000),
    "keepalive_timeout": _between(0.01, 3600, "seconds"),
    "header_timeout": _between(0.01, 3600, "seconds"),
    "body_timeout": _between(0.01, 3600, "seconds"),
    "verify_workers": _between(1, 256, "processes"),
    "verify_queue": _between(0, 100_000),
    "verify_per_client": _between(1, 10_000),
    "verify_budget": _between(0.001, 1000, "worker-seconds per second"),
    "scrub_rate": _between(0, 100_000, "tiles and bundles per second (0: off)"),
    "workers": _between(1, 256, "processes"),
    "publish": _data,
    "fast_path": _one_of("on", "off"),
    "pq_checkpoints": _one_of("on", "off"),
}


def _problem(name: str, value: Any) -> str | None:
    kind = _KINDS[name]
    ok = {
        "Path": isinstance(value, Path),
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "tuple[str, ...]": isinstance(value, tuple) and all(isinstance(v, str) for v in value),
    }[kind]
    if not ok:
        return f"{value!r} is not a valid {kind}"
    return _RULES[name](value)


def _cross_problem(values: Mapping[str, Any]) -> tuple[str, str] | None:
    """(the setting to blame, the problem) for the rules that join two settings."""
    witnesses, quorum = values["witnesses"], values["witness_quorum"]
    mirrors = values["mirrors"]
    cosigners = len(witnesses) + len(mirrors)
    if cosigners and quorum > cosigners:
        return "witness_quorum", (f"witness_quorum {quorum} is more than the {cosigners} "
                                  "witness(es) and mirror(s) configured (0 means a majority)")
    if not cosigners and quorum:
        return "witness_quorum", "witness_quorum is set but no witnesses are configured"
    keys = [parse_witness_spec(w).verifier.public_key for w in witnesses]
    if len(set(keys)) != len(keys):
        return "witnesses", "the same witness key is configured twice"
    mirror_keys = [parse_mirror_spec(m).verifier.public_key for m in mirrors]
    if len(set(mirror_keys)) != len(mirror_keys) or set(mirror_keys) & set(keys):
        return "mirrors", "the same mirror (or witness) key is configured twice"
    return None


_KINDS: Mapping[str, str] = {f.name: str(f.type) for f in fields(Settings)}
_ENV_PREFIX = "NOTARY_"


def _mask_url(value: Any) -> Any:
    """A PostgreSQL URL as messages show it: never in full, since it may hold a password."""
    return "postgresql://…" if isinstance(value, str) and is_postgres(value) else value


def _coerce(name: str, value: Any) -> Any:
    """A value from a flag, the environment (text) or TOML (typed) as the setting's type.

    Strict on purpose: ``1.5`` or ``true`` for an integer setting is a mistake to report, not
    a number to round.
    """
    kind = _KINDS[name]
    try:
        if kind == "Path":
            if not isinstance(value, str | Path):
                raise ValueError
            return Path(value)
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError
            return int(value)
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ValueError
            return float(value)
        if kind == "tuple[str, ...]":
            items = value.replace(",", " ").split() if isinstance(value, str) else value
            if not isinstance(items, list | tuple) or not all(isinstance(v, str) for v in items):
                raise ValueError
            return tuple(items)
        if not isinstance(value, str):
            raise ValueError
        return value
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a valid {kind}") from None


def _flag(name: str) -> str:
    return {"witnesses": "--witness", "mirrors": "--mirror"}.get(name,
                                                                 "--" + name.replace("_", "-"))


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
    where: dict[str, str] = {}
    for name in names:
        env_name = _ENV_PREFIX + name.upper()
        # Where a value came from, for messages; a secret one (a database URL may hold a
        # password) is named but never shown.
        shown = _mask_url if name == "database" else (lambda v: v)
        for source, value in ((f"{_flag(name)} {shown(flags.get(name))!s}", flags.get(name)),
                              (f"{env_name}={shown(env.get(env_name))}", env.get(env_name)),
                              (f"{path}: {name} = {shown(file_values.get(name))!r}",
                               file_values.get(name))):
            if value is None or value == "":
                continue
            try:
                chosen[name] = _coerce(name, value)
                problem = _problem(name, chosen[name])
            except ValueError as e:
                problem = str(e)
            if problem:
                raise ConfigError(f"{source}: {name} {problem}")
            where[name] = source
            break
    merged = {f.name: f.default for f in fields(Settings)} | chosen
    cross = _cross_problem(merged)
    if cross is not None:
        name, problem = cross
        raise ConfigError(f"{where.get(name, f'default {name}')}: {problem}")
    return Settings(**chosen)

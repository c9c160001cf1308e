"""The ``notary serve`` settings: one table, and flags, then environment, then TOML, then defaults.

The table is :class:`Settings` itself: each field's metadata (:func:`_about`) records, beside
its type and default, everything else said about it (its group, help, rule, flag, metavar,
choices). :data:`SETTINGS` reads the fields back as one row each, and everything that names a
setting comes from those rows: the checks, the ``NOTARY_*`` environment variables and TOML keys
:func:`resolve` reads, the flags of ``notary serve`` (``notary.cli.serve``) and
docs/configuration.md (``notary.serving.config_page``). A new setting is one declaration: it
cannot be a flag without a rule, nor documented with a stale default.

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
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ledger.core.publish_target import PublishTargetError, parse_publish_target
from ledger.process.netaddr import AddressError, parse_host_port
from notary.core.databases import MEMORY, database_problem, is_postgres
from notary.core.errors import NotaryBaseError
from notary.core.periods import span_problem

# The table is imported to build the flags of every command that takes a store flag, for
# ``--help`` too; so the rules that need the log's code import it only when they have a value
# to check (each ``# deferred:`` below), and the store backends are not imported at all.


class ConfigError(NotaryBaseError, ValueError):
    pass


# --- the rules ---------------------------------------------------------------------------------

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
    if not value:
        return None
    # deferred: the note code (and PyNaCl) only for an origin to check
    from ledger.core.note import is_valid_key_name

    if not is_valid_key_name(value):
        return (f"{value!r} is not a valid log origin (non-empty, no spaces, no '+', no "
                "control characters)")
    return None


def _path(value: Any) -> str | None:
    return "must not contain a NUL character" if "\0" in str(value) else None


def _publish_target(value: Any) -> str | None:
    try:
        parse_publish_target(str(value))
    except PublishTargetError as e:
        return str(e)
    return _path(value)


def _witness_policy(value: Any) -> str | None:
    if value and not Path(value).expanduser().is_file():
        return f"{value!r} is not a readable C2SP tlog-policy file"
    return None


def _witnesses(value: Any) -> str | None:
    if not value:
        return None
    # deferred: the witnessing job (HTTP clients, metrics) only for a witness to check
    from ledger.jobs.witnessing import WitnessConfigError, parse_witness_spec

    for spec in value:
        try:
            parse_witness_spec(spec)
        except WitnessConfigError as e:
            return str(e)
    return None


def _mirrors(value: Any) -> str | None:
    if not value:
        return None
    # deferred: the witnessing job (HTTP clients, metrics) only for a mirror to check
    from ledger.jobs.witnessing import WitnessConfigError, parse_mirror_spec

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
_SECONDS = _between(0.01, 3600, "seconds")


# --- the table ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """One row of the settings table: a field of :class:`Settings` and all that is said of it."""

    name: str
    """The field; the TOML key (``-`` for ``_`` allowed) and, in capitals after ``NOTARY_``,
    the environment variable."""
    kind: str
    """The field's type as written: ``Path``, ``str``, ``int``, ``float`` or
    ``tuple[str, ...]`` (a repeatable flag, a TOML list, or words in the environment)."""
    default: object
    group: str
    """The section of docs/configuration.md, one of :data:`GROUPS`."""
    help: str
    """What it is, for ``--help`` and the page; starts in lower case, no final full stop."""
    rule: Check
    flag: str | None
    """``--max-body``; None for a setting only the environment and the TOML file set."""
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    shown_default: str = ""
    """The default in words, where the value would not say it (``http://<listen>`` for "")."""
    detail: str = ""
    """Sentences for the page that ``--help`` has no room for: what happens at the limit."""
    secret: bool = False
    """The value may hold a password: messages name the setting but never show the value."""

    @property
    def env(self) -> str:
        return "NOTARY_" + self.name.upper()

    @property
    def repeatable(self) -> bool:
        return self.kind == "tuple[str, ...]"

    @property
    def default_text(self) -> str:
        """The default in words: ``shown_default``, else the value (``""`` if it is empty)."""
        if self.shown_default:
            return self.shown_default
        value = self.default
        if isinstance(value, float):
            return _number(value)
        return "" if value in ("", ()) else str(value)


SERVER = "Server"
STORE = "Store and log"
LIMITS = "Limits against hostile clients"
VERIFY = "The verification pool"
WITNESSES = "Witnesses and mirrors"
LOGGING = "Logging"
GROUPS = (SERVER, STORE, LIMITS, VERIFY, WITNESSES, LOGGING)
"""The table's groups, in the order the page shows them."""

_ROW = "notary.serving.config.Setting"  # the key of a field's metadata that holds its row


def _about(group: str, help: str, rule: Check | None = None, *, flag: str | None = "",
           metavar: str | None = None, choices: tuple[str, ...] = (), shown_default: str = "",
           detail: str = "", secret: bool = False) -> dict[str, Setting]:
    """A field's metadata: its row, but for name, type and default (the field's own, filled in
    by :func:`_rows`). ``flag``: ``""`` for ``--`` and the name with dashes, None for no flag;
    ``choices`` are the rule when there is no other."""
    if rule is None:
        if not choices:
            raise TypeError("a setting needs a rule or choices")
        rule = _one_of(*choices)
    return {_ROW: Setting("", "", None, group, help, rule, flag, metavar, choices,
                          shown_default, detail, secret)}


@dataclass(frozen=True)
class Settings:
    """What one ``notary serve`` runs with; each field is a row of the table (its metadata)."""

    data: Path = field(default=Path("notary-data"), metadata=_about(
        STORE, "data directory: the SQLite store and the key files",
        _path, metavar="DIR", shown_default="./notary-data"))
    database: str = field(default="", metadata=_about(
        STORE, f"the store: empty for the SQLite file in --data, {MEMORY!r} for a "
        "throwaway one that lives as long as the process (serve only: tests, demos), or a "
        "postgresql://host[,host2]/dbname URL shared by several frontends", _database,
        metavar="DB", secret=True))
    listen: str = field(default="127.0.0.1:8080", metadata=_about(
        SERVER, "address and port to listen on", _listen,
        metavar="HOST:PORT"))
    public_url: str = field(default="", metadata=_about(
        SERVER, "URL clients use to reach this notary, written into new receipts",
        _public_url, metavar="URL", shown_default="http://<listen>"))
    origin: str = field(default="", metadata=_about(
        STORE, "log origin, fixed when the data directory is created and never changed after",
        _origin, metavar="ORIGIN",
        shown_default="the public URL without its scheme"))
    max_body: int = field(default=64 * 1024, metadata=_about(
        LIMITS, "request body limit in bytes", _between(1024, 64 * _MIB, "bytes"),
        metavar="BYTES"))
    max_batch: int = field(default=4096, metadata=_about(
        STORE, "entries committed in one batch at most", _between(1, 65536, "entries"),
        metavar="N"))
    workers: int = field(default=1, metadata=_about(
        SERVER, "processes serving the log behind one listening port",
        _between(1, 256, "processes"), metavar="N"))
    log_format: str = field(default="auto", metadata=_about(
        LOGGING, "how log lines are written: auto is console on a terminal, else JSON",
        choices=("auto", "json", "console")))
    log_level: str = field(default="info", metadata=_about(
        LOGGING, "the least severe messages logged",
        choices=("debug", "info", "warning", "error")))
    # Submitted to and pushed to by the witnessing job (ledger/jobs/witnessing.py).
    witnesses: tuple[str, ...] = field(default=(), metadata=_about(
        WITNESSES, "a witness to collect cosignatures from (repeatable)", _witnesses,
        flag="--witness", metavar="URL=VKEY"))
    witness_quorum: int = field(default=0, metadata=_about(
        WITNESSES, "cosignatures a published checkpoint needs; 0 for a majority",
        _between(0, 1000), metavar="K"))
    witness_policy: str = field(default="", metadata=_about(
        WITNESSES, "a C2SP tlog-policy file naming the witnesses (with their submission "
        "URLs) and the quorum, instead of --witness/--witness-quorum", _witness_policy,
        metavar="FILE"))
    witness_interval: float = field(default=2.0, metadata=_about(
        WITNESSES, "seconds between submissions of a grown tree",
        _between(0.01, 86400, "seconds"), metavar="S"))
    witness_timeout: float = field(default=5.0, metadata=_about(
        WITNESSES, "seconds to wait for a witness's answer", _SECONDS, metavar="S"))
    witness_refresh: float = field(default=60.0, metadata=_about(
        WITNESSES, "seconds after which an unchanged checkpoint is submitted again, so its "
        "cosignatures stay fresh while nothing is appended", _between(0.01, 86400, "seconds"),
        metavar="S",
        detail="A cosignature served is then never older than this plus one round "
               "(`witness_interval` and the witness's answer time) while its witness answers: "
               "a client that bounds a cosignature's age keeps accepting an idle log's "
               "checkpoint (docs/witnesses.md)."))
    mirrors: tuple[str, ...] = field(default=(), metadata=_about(
        WITNESSES, "a C2SP tlog-mirror (submission URL and key) to push every grown "
        "checkpoint and its entries to; its cosignature counts as a witness's (repeatable)",
        _mirrors, flag="--mirror", metavar="URL=VKEY"))
    # The connection limits of ledger/http/server.py.
    max_connections: int = field(default=0, metadata=_about(
        LIMITS, "open connections at most; 0 derives it from RLIMIT_NOFILE, keeping a reserve "
        "of descriptors for the database and files", _between(0, 1_000_000), metavar="N",
        detail="That is `RLIMIT_NOFILE` (raised to its hard limit at start) minus the descriptors "
        "open at start minus a reserve of 64. Beyond it, the connection idle longest (no "
        "request in progress, or a head still arriving) is closed to make room; if every "
        "connection has a request in progress, new ones wait in the listen backlog. An "
        "explicit value the descriptor limit cannot honour is refused at start."))
    keepalive_timeout: float = field(default=5.0, metadata=_about(
        LIMITS, "seconds an idle keep-alive connection stays open", _SECONDS,
        metavar="S", detail="Beyond it the connection is closed."))
    header_timeout: float = field(default=10.0, metadata=_about(
        LIMITS, "seconds to receive a request's line and headers", _SECONDS,
        metavar="S", detail="Counted from connect or the first byte; a head not complete in "
        "time gets 408 and the connection is closed."))
    body_timeout: float = field(default=30.0, metadata=_about(
        LIMITS, "seconds to receive a request's body", _SECONDS, metavar="S",
        detail="Counted from the end of its head; a body not complete in time "
        "gets 408 and the connection is closed (even with a valid key)."))
    # The pool behind POST /v1/tool-calls/verify (notary/http/verify_pool.py).
    verify_workers: int = field(default=1, metadata=_about(
        VERIFY, "processes that run POST /v1/tool-calls/verify",
        _between(1, 256, "processes"), metavar="N",
        detail="Verification (parsing, JCS, hashing) runs in these worker processes, never on "
        "the event loop."))
    verify_queue: int = field(default=8, metadata=_about(
        VERIFY, "verifies that may wait for a worker before 429", _between(0, 100_000),
        metavar="N", detail="Verifications being worked on (body received) beyond workers + "
        "queue get 429 `verify_rate_limited` with `Retry-After`."))
    verify_per_client: int = field(default=2, metadata=_about(
        VERIFY, "verifies in flight per client address before 429", _between(1, 10_000),
        metavar="N", detail="Counted per client IP address, bodies still arriving included; "
        "beyond it, 429 before the body is read."))
    verify_budget: float = field(default=0.5, metadata=_about(
        VERIFY, "worker-seconds of verification per second one client address may use on "
        "average", _between(0.001, 1000, "worker-seconds per second"), metavar="S",
        detail="A bucket holds 10 s of it; an empty bucket gets 429 with the "
        "seconds until it refills."))
    publish: str = field(default="", metadata=_about(
        STORE, "keep the log's static tlog-tiles tree up to date in DIR, or in an S3 bucket "
        "(s3://BUCKET/PREFIX, configured by the standard AWS environment and files), for a "
        "web server, the bucket or a CDN to serve reads off the database "
        "(docs/object-storage.md)", _publish_target, metavar="DIR|s3://BUCKET/PREFIX"))
    # ledger/jobs/scrub.py.
    scrub_rate: float = field(default=20.0, metadata=_about(
        STORE, "stored tiles and bundles the background scrub re-verifies per second; 0 turns "
        "it off", _between(0, 100_000, "tiles and bundles per second (0: off)"),
        metavar="N"))
    # notary/serving/log_schedule.py, docs/lifecycle.md.
    log_period: str = field(default="off", metadata=_about(
        STORE, "roll to a new log at every boundary of this UTC calendar period: 12h, 30d, 6mo, "
        "1y…, or off", span_problem, metavar="PERIOD",
        detail="Boundaries are fixed UTC instants, the same for every process (`6mo`: January 1 "
        "and July 1 00:00 UTC; `Nd`: 00:00 UTC of every day whose count since 1970-01-01 is a "
        "multiple of N; months must divide a year). At each boundary the active log is frozen "
        "(reason `scheduled`) once, however many processes serve it; a notary stopped across "
        "boundaries rolls once at start. Off by default: a roll gives the log a new origin and "
        "key that witnesses and pinned verifiers must be told about, which an operator should "
        "choose to do (docs/lifecycle.md)."))
    log_retention: str = field(default="off", metadata=_about(
        STORE, "prune whole every frozen log frozen longer ago than this age (12h, 90d, 6mo, "
        "2y…), or off", span_problem, metavar="AGE",
        detail="As `notary log prune ORIGIN --min-index <its size>`: its tiles and entries "
        "answer 404 and stay stored. One process of the notary does it, at start and hourly; "
        "each pruned log is logged once. Off by default: pruning withdraws data that clients "
        "may still fetch."))
    # The plain path of ledger/http/server.py.
    fast_path: str = field(default="on", metadata=_about(
        SERVER, "on: POST /v1/tool-calls on the plain path; off: every request through "
        "aiohttp's request objects (to compare: the answers are the same)",
        flag=None, choices=("on", "off")))
    # ledger/log/pq_checkpoints.py.
    pq_checkpoints: str = field(default="on", metadata=_about(
        STORE, "sign published checkpoints with the log's ML-DSA-44 key too (derived "
        "from log.key) as well as Ed25519", choices=("on", "off")))
    # ledger/log/cose_roots.py, docs/scitt.md.
    cose_receipts: str = field(default="on", metadata=_about(
        STORE, "serve RFC 9942 COSE receipts (GET /v1/tool-calls/{id}/receipt.cose) and the "
        "SCITT keys; the log signs a tree root with its key when a receipt asks for it, off "
        "the write path", choices=("on", "off")))

    def __post_init__(self) -> None:
        for row in SETTINGS:
            problem = _problem(row, getattr(self, row.name))
            if problem:
                raise ConfigError(f"setting {row.name}: {problem}")
        cross = _cross_problem({row.name: getattr(self, row.name) for row in SETTINGS})
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


def _rows() -> tuple[Setting, ...]:
    rows = []
    for f in fields(Settings):
        if _ROW not in f.metadata:
            raise TypeError(f"Settings.{f.name} has no row: declare it with _about(...)")
        declared: Setting = f.metadata[_ROW]
        flag = "--" + f.name.replace("_", "-") if declared.flag == "" else declared.flag
        rows.append(replace(declared, name=f.name, kind=str(f.type), default=f.default,
                            flag=flag))
    return tuple(rows)


SETTINGS: tuple[Setting, ...] = _rows()
"""The settings table: one row per field of :class:`Settings`, in its order."""
_BY_NAME: Mapping[str, Setting] = {row.name: row for row in SETTINGS}


def _problem(row: Setting, value: Any) -> str | None:
    ok = {
        "Path": isinstance(value, Path),
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "tuple[str, ...]": isinstance(value, tuple) and all(isinstance(v, str) for v in value),
    }[row.kind]
    if not ok:
        return f"{value!r} is not a valid {row.kind}"
    return row.rule(value)


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
    if not cosigners:
        return None
    # deferred: the witnessing job (HTTP clients, metrics) only for witnesses to compare
    from ledger.jobs.witnessing import parse_mirror_spec, parse_witness_spec

    keys = [parse_witness_spec(w).verifier.public_key for w in witnesses]
    if len(set(keys)) != len(keys):
        return "witnesses", "the same witness key is configured twice"
    mirror_keys = [parse_mirror_spec(m).verifier.public_key for m in mirrors]
    if len(set(mirror_keys)) != len(mirror_keys) or set(mirror_keys) & set(keys):
        return "mirrors", "the same mirror (or witness) key is configured twice"
    return None


def _mask_url(value: Any) -> Any:
    """A PostgreSQL URL as messages show it: never in full, since it may hold a password."""
    return "postgresql://…" if isinstance(value, str) and is_postgres(value) else value


def _coerce(row: Setting, value: Any) -> Any:
    """A value from a flag, the environment (text) or TOML (typed) as the setting's type.

    Strict on purpose: ``1.5`` or ``true`` for an integer setting is a mistake to report, not
    a number to round.
    """
    kind = row.kind
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
        if row.repeatable:
            items = value.replace(",", " ").split() if isinstance(value, str) else value
            if not isinstance(items, list | tuple) or not all(isinstance(v, str) for v in items):
                raise ValueError
            return tuple(items)
        if not isinstance(value, str):
            raise ValueError
        return value
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a valid {kind}") from None


def resolve(flags: Mapping[str, Any], env: Mapping[str, str] | None = None,
            config_file: Path | None = None) -> Settings:
    """Merge the four sources; unknown keys in the TOML file are an error, not ignored."""
    env = os.environ if env is None else env
    file_values: dict[str, Any] = {}
    path = config_file or (Path(env["NOTARY_CONFIG"]) if env.get("NOTARY_CONFIG") else None)
    if path is not None:
        try:
            raw = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"cannot read config file {path}: {e}") from e
        for key, value in raw.items():
            name = key.replace("-", "_")
            if name not in _BY_NAME:
                raise ConfigError(f"{path}: unknown setting {key!r}")
            file_values[name] = value
    chosen: dict[str, Any] = {}
    where: dict[str, str] = {}
    for row in SETTINGS:
        name = row.name
        # Where a value came from, for messages; a secret one (a database URL may hold a
        # password) is named but never shown.
        shown = _mask_url if row.secret else (lambda v: v)
        for source, value in ((f"{row.flag or name} {shown(flags.get(name))!s}", flags.get(name)),
                              (f"{row.env}={shown(env.get(row.env))}", env.get(row.env)),
                              (f"{path}: {name} = {shown(file_values.get(name))!r}",
                               file_values.get(name))):
            if value is None or value == "":
                continue
            try:
                chosen[name] = _coerce(row, value)
                problem = _problem(row, chosen[name])
            except ValueError as e:
                problem = str(e)
            if problem:
                raise ConfigError(f"{source}: {name} {problem}")
            where[name] = source
            break
    merged = {row.name: row.default for row in SETTINGS} | chosen
    cross = _cross_problem(merged)
    if cross is not None:
        name, problem = cross
        raise ConfigError(f"{where.get(name, f'default {name}')}: {problem}")
    return Settings(**chosen)

"""Where the server is and how the adapter is set up: a URI or a connection's fields and
extras into typed settings, ODBC connection-string values, the ODBC driver to use.

Nothing here connects to a server.
"""
from __future__ import annotations

import glob
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

from switchyard.targets.base import TargetError

LOAD_MODES = ("bulk_insert", "tds")
_MODE_ALIASES = {"bulk_insert": "bulk_insert", "bulk-insert": "bulk_insert", "tds": "tds", "bcp": "tds"}
# Largest TDS packet SQL Server accepts (the record run's "32 KB" instead of 4 KB).
MAX_PACKET_SIZE = 32767
DEFAULT_PORT = 1433
DEFAULT_FILE_DIR = "/var/opt/mssql/data"
ODBC_DRIVER_NAME = "ODBC Driver 18 for SQL Server"
# Settings read from a connection's extras or a URI's query, besides the constructor's.
ADAPTER_OPTIONS = ("load_mode", "server_data_root", "local_data_root", "ports", "base_port", "port_count",
                   "file_dirs", "file_placement", "files_per_filegroup", "file_size_mb", "file_growth_mb",
                   "file_max_size_mb", "file_headroom", "batch_size", "packet_size", "scheduler_guard",
                   "guard_retries", "odbc_driver", "codepage", "login_timeout", "text_check", "commit_lock_wait_ms",
                   "commit_attempts")
# Rows take about as many bytes in a heap as in a text file; 1.2 covers page fill and row
# overhead. Raise it for nchar/nvarchar columns (UTF-16 doubles ASCII text).
DEFAULT_FILE_HEADROOM = 1.2
# The filegroup of the empty partitions below the first stream and above the last.
EDGE_FILEGROUP = "fg_edge"
# ODBC attributes passed through to both drivers; anything else in extras is refused.
ODBC_ATTRIBUTES = {"encrypt": "Encrypt", "trustservercertificate": "TrustServerCertificate",
                   "hostnameincertificate": "HostNameInCertificate"}
# A path the server reads is written into a string literal: only plain characters.
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_.:/\\ -]+$")
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.-]+$")


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _int_list(value: Any) -> list[int]:
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s]+", value) if v]
    try:
        out = [int(v) for v in value]
    except (TypeError, ValueError) as exc:
        raise TargetError(f"ports: {value!r} is not a list of port numbers") from exc
    for p in out:
        if not 0 < p < 65536:
            raise TargetError(f"ports: {p} is not a TCP port")
    return out


@dataclass(frozen=True)
class Endpoint:
    """Where the server is and who logs in; the port comes from the port map per stream."""
    host: str = "localhost"
    port: int = DEFAULT_PORT
    user: str | None = None
    password: str | None = None
    database: str = "switchyard"
    attributes: tuple[tuple[str, str], ...] = ()


def parse_uri(uri: str) -> tuple[Endpoint, dict[str, str]]:
    """`mssql://user:password@host:port/database?option=value&...` into an endpoint and options.

    Options are the adapter's settings (ADAPTER_OPTIONS) and the ODBC attributes Encrypt,
    TrustServerCertificate and HostNameInCertificate.
    """
    parts = urlsplit(uri)
    if parts.scheme not in ("mssql", "sqlserver", "mssql+pyodbc"):
        raise TargetError(f"{parts.scheme!r} is not an SQL Server URI scheme (use mssql://user:password@host:port/database)")
    database = unquote(parts.path.lstrip("/")) or "switchyard"
    query = dict(parse_qsl(parts.query))
    options = {k: v for k, v in query.items() if k in ADAPTER_OPTIONS}
    attributes = _odbc_attributes({k: v for k, v in query.items() if k not in ADAPTER_OPTIONS})
    return Endpoint(host=parts.hostname or "localhost", port=parts.port or DEFAULT_PORT,
                    user=unquote(parts.username) if parts.username else None,
                    password=unquote(parts.password) if parts.password is not None else None,
                    database=database, attributes=attributes), options


def parse_connection(host: str | None = None, port: int | str | None = None, login: str | None = None,
                     password: str | None = None, schema: str | None = None,
                     extra: Mapping[str, Any] | None = None) -> tuple[Endpoint, dict[str, Any]]:
    """A connection's fields (as an Airflow connection has them: `schema` is the database)
    into an endpoint and options, as `parse_uri` does for a URI: the extra's adapter
    settings (ADAPTER_OPTIONS) are the options, the rest must be ODBC attributes."""
    extra = dict(extra or {})
    options = {k: extra.pop(k) for k in list(extra) if k in ADAPTER_OPTIONS}
    try:
        port = int(port or DEFAULT_PORT)
    except (TypeError, ValueError) as exc:
        raise TargetError(f"connection port {port!r} is not a TCP port") from exc
    return Endpoint(host=host or "localhost", port=port, user=login or None, password=password or None,
                    database=schema or "switchyard", attributes=_odbc_attributes(extra)), options


def _odbc_attributes(raw: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    out = []
    for key, value in raw.items():
        name = ODBC_ATTRIBUTES.get(key.lower())
        if name is None:
            raise TargetError(f"connection option {key!r} is not known (known: "
                              f"{', '.join(ADAPTER_OPTIONS + tuple(ODBC_ATTRIBUTES.values()))})")
        value = str(value)
        if not _SAFE_VALUE.match(value):
            raise TargetError(f"connection option {key}: {value!r} has characters that are not allowed")
        out.append((name, value))
    return tuple(out)


def odbc_value(value: str) -> str:
    """An ODBC connection-string value, braced when it holds anything special."""
    if re.search(r"[;{}=\s]", value) or value != value.strip():
        return "{" + value.replace("}", "}}") + "}"
    return value


def find_odbc_driver() -> str:
    """The Microsoft ODBC Driver 18 library shipped in the mssql-python-odbc wheel, else its name.

    Using the wheel's library means no Microsoft apt repository is needed; unixODBC's
    libodbc.so.2 (Debian package `unixodbc`) is still needed by pyodbc itself.
    """
    try:
        import mssql_python_odbc
    except ImportError:
        return ODBC_DRIVER_NAME
    libs = mssql_python_odbc.get_libs_dir()
    distro = "debian_ubuntu"
    try:
        release = Path("/etc/os-release").read_text().lower()
        if re.search(r"^id(_like)?=.*(rhel|fedora|centos)", release, re.M):
            distro = "rhel"
        elif re.search(r"^id(_like)?=.*suse", release, re.M):
            distro = "suse"
    except OSError:
        pass
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower())
    for pattern in (f"{libs}/linux/{distro}/{arch}/lib/libmsodbcsql-18*.so*",
                    f"{libs}/linux/*/{arch}/lib/libmsodbcsql-18*.so*"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return ODBC_DRIVER_NAME



def _dirs(value: Any, what: str) -> list[str]:
    dirs = [d.strip() for d in (value.split(",") if isinstance(value, str) else value or []) if str(d).strip()]
    for d in dirs:
        if not _SAFE_PATH.match(d):
            raise TargetError(f"{what}: {d!r} has characters that are not allowed")
    return dirs


def _placement(value: Any) -> dict[str, list[str]]:
    """`file_placement`: the folders (one per volume) each filegroup's files go to, as a
    mapping, or as text `fg1=/v1,/v2;fg2=/v3;*=/v4` (`*`: every filegroup not named)."""
    if not value:
        return {}
    if isinstance(value, str):
        pairs = {}
        for part in value.split(";"):
            if not part.strip():
                continue
            name, _, dirs = part.partition("=")
            if not _:
                raise TargetError(f"file_placement: {part!r} is not filegroup=folder[,folder...]")
            pairs[name.strip()] = dirs
        value = pairs
    if not isinstance(value, Mapping):
        raise TargetError("file_placement: a mapping of filegroup names to folder lists")
    out = {}
    for name, dirs in value.items():
        if name != "*" and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", str(name)):
            raise TargetError(f"file_placement: {name!r} is not a filegroup name (fg1, fg2, ..., fg_edge, *)")
        out[str(name)] = _dirs(dirs, f"file_placement.{name}")
        if not out[str(name)]:
            raise TargetError(f"file_placement.{name}: no folder")
    return out


def _positive(value: Any, what: str, kind: type = int) -> Any:
    try:
        out = kind(value)
    except (TypeError, ValueError) as exc:
        raise TargetError(f"{what}: {value!r} is not a number") from exc
    if out <= 0:
        raise TargetError(f"{what}: must be positive, not {value!r}")
    return out


@dataclass(frozen=True)
class Settings:
    """The adapter's settings, typed and checked: everything that reaches SQL text is a
    number, a validated name, or a path of plain characters."""
    load_mode: str
    server_data_root: str | None
    local_data_root: Path
    ports: list[int]
    file_dirs: list[str]
    file_placement: dict[str, list[str]]
    files_per_filegroup: int
    file_size_mb: int | None        # a floor under the size computed from the batch
    file_growth_mb: int | None      # None: an eighth of the file, 64 MB .. 4 GB
    file_max_size_mb: int | None    # None: UNLIMITED
    file_headroom: float
    batch_size: int
    packet_size: int
    scheduler_guard: bool
    guard_retries: int
    odbc_driver: str | None
    codepage: str | None
    login_timeout: int
    # Before a BULK INSERT whose text the server would not store exactly (a single-byte or
    # RAW code page), read the file for non-ASCII bytes and take the client path if any.
    # Off only for files known to hold text the columns store exactly (TPC-H: ASCII).
    text_check: bool = True
    # The table's commit: how long one attempt's normal-priority Sch-M request (TRUNCATE, SPLIT,
    # MERGE) may queue readers behind it (LOCK_TIMEOUT, ms), and how many attempts in all
    # (commit_table.sql says why).
    commit_lock_wait_ms: int = 1000
    commit_attempts: int = 30


def parse_settings(opt: Mapping[str, Any], default_port: int, default_data_root: Path) -> Settings:
    mode = _MODE_ALIASES.get(str(opt.get("load_mode", "bulk_insert")).lower())
    if mode is None:
        raise TargetError(f"load_mode {opt.get('load_mode')!r} is not one of bulk_insert, tds (bcp)")
    server_data_root = str(opt["server_data_root"]) if opt.get("server_data_root") else None
    if server_data_root and not _SAFE_PATH.match(server_data_root):
        raise TargetError(f"server_data_root {server_data_root!r} has characters that are not allowed")
    if opt.get("ports"):
        ports = _int_list(opt["ports"])
    else:
        base = int(opt.get("base_port") or default_port)
        ports = _int_list([base + i for i in range(int(opt.get("port_count") or 1))])
    codepage = str(opt["codepage"]) if opt.get("codepage") else None
    if codepage and not re.fullmatch(r"ACP|OEM|RAW|[0-9]{3,5}", codepage, re.I):
        raise TargetError(f"codepage {codepage!r} is not ACP, OEM, RAW or a code page number")
    optional = {k: (_positive(opt[k], k) if opt.get(k) else None)
                for k in ("file_size_mb", "file_growth_mb", "file_max_size_mb")}
    return Settings(
        load_mode=mode, server_data_root=server_data_root,
        local_data_root=Path(opt.get("local_data_root") or default_data_root).resolve(), ports=ports,
        file_dirs=_dirs(opt.get("file_dirs") or [DEFAULT_FILE_DIR], "file_dirs"),
        file_placement=_placement(opt.get("file_placement")),
        files_per_filegroup=max(1, int(opt.get("files_per_filegroup") or 1)),
        **optional,
        file_headroom=_positive(opt.get("file_headroom") or DEFAULT_FILE_HEADROOM, "file_headroom", float),
        batch_size=_positive(opt.get("batch_size") or 100_000, "batch_size"),
        packet_size=min(_positive(opt.get("packet_size") or MAX_PACKET_SIZE, "packet_size"), MAX_PACKET_SIZE),
        scheduler_guard=_bool(opt.get("scheduler_guard", True)),
        guard_retries=int(opt.get("guard_retries") or 8),
        odbc_driver=opt.get("odbc_driver") or None, codepage=codepage.upper() if codepage and not codepage.isdigit()
        else codepage, login_timeout=int(opt.get("login_timeout") or 15),
        text_check=_bool(opt.get("text_check", True)),
        commit_lock_wait_ms=_positive(opt.get("commit_lock_wait_ms") or 1000, "commit_lock_wait_ms"),
        commit_attempts=_positive(opt.get("commit_attempts") or 30, "commit_attempts"))

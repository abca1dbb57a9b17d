"""Where the server is and how the adapter is set up: a URI or an Airflow connection's
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

from ..base import TargetError

LOAD_MODES = ("bulk_insert", "tds")
_MODE_ALIASES = {"bulk_insert": "bulk_insert", "bulk-insert": "bulk_insert", "tds": "tds", "bcp": "tds"}
# Largest TDS packet SQL Server accepts (the record run's "32 KB" instead of 4 KB).
MAX_PACKET_SIZE = 32767
DEFAULT_PORT = 1433
DEFAULT_FILE_DIR = "/var/opt/mssql/data"
ODBC_DRIVER_NAME = "ODBC Driver 18 for SQL Server"
# Settings read from a connection's extras or a URI's query, besides the constructor's.
ADAPTER_OPTIONS = ("load_mode", "server_data_root", "local_data_root", "ports", "base_port", "port_count",
                   "file_dirs", "files_per_filegroup", "file_size_mb", "file_growth_mb", "batch_size",
                   "packet_size", "scheduler_guard", "guard_retries", "odbc_driver", "codepage",
                   "login_timeout")
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


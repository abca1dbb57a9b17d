"""SQL Server: the record-load method itself.

* one filegroup per stream (`fg<k>`, N files each), a RANGE LEFT partition function per
  table and a scheme mapping stream k's partition to `fg<k>`;
* one heap staging table per (table, stream) on its filegroup, with the partition's range
  as a trusted CHECK constraint;
* the load, chosen per deployment (`load_mode`):
  - `bulk_insert`: server-side BULK INSERT of the file (the 2010 run), the worker's path
    mapped to the path the server sees (`server_data_root`);
  - `tds` (alias `bcp`): the worker parses the file and streams rows over TDS bulk copy
    with a table lock (the 2008 run), for files the server cannot see;
* each stream's connection pinned to a TCP port from a port map (the record runs mapped
  ports to soft-NUMA nodes), and, for BULK INSERT, one load per scheduler claimed with a
  session applock;
* SWITCH of the validated staging table into its partition, WAIT_AT_LOW_PRIORITY;
* one run at a time per target schema: the run lease (base.py), a row in the control
  schema's `run_lease` taken with MERGE ... WITH (HOLDLOCK) (lease_claim.sql).

Drivers: pyodbc with Microsoft ODBC Driver 18 for DDL, BULK INSERT, statistics and for
Great Expectations (mssql+pyodbc); mssql-python only for its TDS bulk copy. Both are
imported inside the functions that use them.
"""
from __future__ import annotations

import codecs
import dataclasses
import logging
import math
import re
import textwrap
import time
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Iterator, Mapping

from switchyard.core.keys import partition_name
from switchyard.core.planner import LoadPlan, StreamPlan, TablePlan, plan_tpch
from switchyard.core.preflight import emptied_whole
from switchyard.core.spec import FileFormat, LoadSpec, Table
from switchyard.targets.base import (LoadResult, ProgressCallback, TargetAdapter, TargetError, _jinja, stream_rows,
                                     unstaged_problems)
from switchyard.targets.mssql.dmv import (IDLE_WAITS, LATCH_STATS_SQL, SCHEDULER_COUNT_SQL, SESSION_STATS_SQL,
                                          WAIT_STATS_SQL, _STAT_FIELDS, LoadWatcher, _load_details, load_logging,
                                          snapshot_delta)
from switchyard.targets.mssql.errors import _message, error_numbers, is_data_error, is_login_refused
from switchyard.targets.mssql.guard import (SCHEDULER_BUSY_ERROR, SCHEDULER_BUSY_MESSAGE, SchedulerBusy,
                                            is_scheduler_busy, with_scheduler_guard)
from switchyard.targets.mssql.recovery import LAST_LOG_BACKUP_SQL, RECOVERY_SQL, RecoveryState, recovery_advice
from switchyard.targets.mssql.rows import FileRows
from switchyard.targets.mssql.keys import KeyType, key_type
from switchyard.targets.mssql.server_config import LAYOUT_SQL, Layout, layout_from_json
from switchyard.targets.mssql.tsql import nstr, quote_name, split_statements, sstr
from switchyard.targets.mssql.catalog import (ColumnInfo, TargetTable, check_copy, dependency_findings,
                                              shape_problems, staging_constraint_name, target_from_catalog,
                                              truncate_problems)
from switchyard.targets.mssql.window import (Incoming, Partition, WindowPlan, keys_text, object_name, plan_window,
                                             show_key)
from switchyard.targets.mssql.settings import (ADAPTER_OPTIONS, EDGE_FILEGROUP, _SAFE_PATH, Endpoint, Settings,
                                               find_odbc_driver, odbc_value, parse_settings, parse_uri)

log = logging.getLogger(__name__)
MB = 1 << 20
PAGE = 8192  # sys.database_files.size and FILEPROPERTY(..., 'SpaceUsed') count 8-KB pages
MIN_FILE_MB = 64
EDGE_FILE_MB = 8  # the edge partitions stay empty: the staging tables' CHECKs keep rows out
# Python's codec name of a file's encoding -> BULK INSERT's CODEPAGE (ASCII is the same in
# every code page: RAW, no conversion).
ENCODING_CODEPAGES = {"utf-8": "65001", "iso8859-1": "28591", "cp1252": "1252", "ascii": "RAW"}
HOST_PLATFORM_SQL = ("SELECT host_platform, CONVERT(int, SERVERPROPERTY('ProductMajorVersion')) "
                     "FROM sys.dm_os_host_info")
# A character column's code page (0 for nchar/nvarchar, 65001 for a _UTF8 collation).
CODE_PAGES_SQL = ("SELECT c.name, COLLATIONPROPERTY(c.collation_name, 'CodePage') FROM sys.columns AS c "
                  "WHERE c.object_id = OBJECT_ID(?) AND c.collation_name IS NOT NULL")
# Data files only (type 0: ROWS).
USED_PAGES_SQL = "SELECT name, FILEPROPERTY(name, 'SpaceUsed') FROM sys.database_files WHERE [type] = 0"
# "Cannot insert the value NULL into column ...": a BULK INSERT met an empty field in a NOT NULL column.
NULL_REFUSED = 515
# A unique index build (1505) or an insert (2601, 2627) met a duplicate key.
DUPLICATE_KEY = frozenset({1505, 2601, 2627})
# An unpartitioned table's next version in the staging schema (`publish: batch`): `<table>__next`.
NEXT_SUFFIX = "__next"

def _plain(value: Any) -> Any:
    """A key value for JSON (XCom, the run's report): dates and times in ISO 8601, decimals as floats."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


class MssqlAdapter(TargetAdapter):
    engine = "mssql"
    quote_open = "["
    quote_close = "]"
    # The columns setup.sql adds to load_stats: where the load ran (session, scheduler, CPU,
    # soft-NUMA node, port), what it read and wrote, and how it was logged.
    load_stats_columns = ("session_id", "scheduler_id", "cpu_id", "node_id", "local_tcp_port", "reads", "writes",
                          "cpu_time_ms", "logging", "log_ratio")

    @classmethod
    def permanent_error(cls, exc: BaseException) -> str | None:
        from switchyard.targets.mssql.errors import permanent_error
        return permanent_error(exc)

    # `switchyard plan`: the ports pinned to the server's nodes (server_config.py).
    plans_ports = True
    gx_datasource = "sql_server"

    @classmethod
    def from_connection(cls, spec: LoadSpec, fields: Any, hook: Any = None, **options: Any) -> "MssqlAdapter":
        """An endpoint (host, port, login, database, ODBC attributes) and the adapter settings,
        both read from the connection's fields and extra (settings.parse_connection)."""
        from switchyard.targets.mssql.settings import parse_connection
        endpoint, settings = parse_connection(host=fields.host, port=fields.port, login=fields.login,
                                              password=fields.password, schema=fields.schema, extra=fields.extra)
        return cls(spec, conn_id=fields.conn_id, endpoint=endpoint, connection_settings=settings, **options)

    @classmethod
    def for_script(cls, spec: LoadSpec, schema: str, args: Any, ports: list[int] | None = None) -> "MssqlAdapter":
        # Stream k's port in the script is the one the server config maps to its node: one
        # pinned port per stream (`--nodes` says otherwise), at most a node mask's 64.
        from switchyard.targets.mssql.server_config import MAX_NODES
        nodes = args.nodes if args.nodes is not None else min(args.streams, MAX_NODES)
        return cls(spec, schema=schema, base_port=args.base_port, port_count=nodes, ports=ports)

    @classmethod
    def plan_ports(cls, args: Any) -> tuple[str, list[int]]:
        from switchyard.targets.mssql.server_config import mssql_plan_ports
        return mssql_plan_ports(args)

    def __init__(self, spec: LoadSpec, conn_id: str | None = None, uri: str | None = None,
                 endpoint: Endpoint | None = None, connection_settings: Mapping[str, Any] | None = None,
                 database: str | None = None, script_batch: str = "batch", **options: Any):
        """A URI (`mssql://...`), or an `endpoint` with `connection_settings` (the adapter
        settings of a connection's extra): switchyard/airflow/connections.py builds those two
        from an Airflow connection (settings.parse_connection). Neither: the adapter only
        writes SQL (script, plan output). `conn_id` names the connection in messages."""
        # Adapter settings (ADAPTER_OPTIONS) given here win over the connection's or the URI's.
        given = {k: options.pop(k) for k in list(options) if k in ADAPTER_OPTIONS}
        super().__init__(spec, **options)
        self.conn_id = conn_id
        self.uri = uri
        endpoint, configured = self._endpoint(endpoint, connection_settings)
        if database:
            endpoint = dataclasses.replace(endpoint, database=database)
        self.endpoint = endpoint
        from switchyard.core.batch import data_root
        self.settings = parse_settings({**configured, **{k: v for k, v in given.items() if v is not None}},
                                       default_port=endpoint.port, default_data_root=data_root())
        for name in Settings.__dataclass_fields__:
            setattr(self, name, getattr(self.settings, name))
        self._server: tuple[str, int] | None = None
        # Per table, how much room its staging tables need beyond their rows' (filegroups): 2.0
        # where the target has indexes to build on them; set by the pre-flight.
        self.index_room: dict[str, float] = {}
        # Seconds between two attempts of a table's commit that timed out on a lock (_run_commit).
        self.commit_pause = 3.0
        # How often a load's session is sampled (where it runs, how it is logged), seconds;
        # None: not at all (the recovery model's rules then say how it was logged).
        self.watch_every: float | None = 0.5
        self.database = self.checked(endpoint.database)
        self.script_batch = script_batch

    # --- configuration ---------------------------------------------------------------
    def _endpoint(self, endpoint: Endpoint | None,
                  settings: Mapping[str, Any] | None) -> tuple[Endpoint, dict[str, Any]]:
        if self.uri:
            return parse_uri(self.uri)
        if endpoint is not None:
            return endpoint, dict(settings or {})
        if self.conn_id:
            raise TargetError(f"connection {self.conn_id!r}: SQL Server's adapter is given the connection's "
                              f"endpoint (switchyard.airflow.connections.adapter_for builds it), or a URI")
        # No connection: the adapter only writes SQL (script, plan output).
        return Endpoint(), {}

    def _port_rule(self) -> str:
        consecutive = self.ports == [self.ports[0] + i for i in range(len(self.ports))]
        if consecutive:
            return (f"stream k connects to port {self.ports[0]}"
                    + (f" + (k - 1) mod {len(self.ports)}" if len(self.ports) > 1 else ""))
        return f"stream k connects to the k-th port of the port map ({len(self.ports)} entries; each stream's below)"

    def port_for(self, stream: int) -> int:
        """Stream k's pinned port: the port map taken round-robin from stream 1."""
        return self.ports[(int(stream) - 1) % len(self.ports)]

    def driver(self) -> str:
        return self.odbc_driver or find_odbc_driver()

    def odbc_connection_string(self, port: int | None = None, driver: str | None = None) -> str:
        e = self.endpoint
        parts = [("DRIVER", "{" + (driver or self.driver()) + "}"),
                 ("SERVER", f"{e.host},{port or self.ports[0]}"), ("DATABASE", e.database)]
        if e.user:
            parts += [("UID", e.user), ("PWD", e.password or "")]
        else:
            parts.append(("Trusted_Connection", "yes"))
        parts += [("APP", "switchyard"), ("PacketSize", str(self.packet_size)), *e.attributes]
        return ";".join(f"{k}={v if k == 'DRIVER' else odbc_value(v)}" for k, v in parts)

    def tds_connection_string(self, port: int) -> str:
        """For mssql-python, which brings its own driver; its bulk copy reads Server and PacketSize."""
        e = self.endpoint
        parts = [("Server", f"{e.host},{port}"), ("Database", e.database)]
        if e.user:
            parts += [("UID", e.user), ("PWD", e.password or "")]
        parts += [("PacketSize", str(self.packet_size)), *e.attributes]
        return ";".join(f"{k}={odbc_value(v)}" for k, v in parts)

    def sqlalchemy_url(self) -> str:
        from sqlalchemy.engine import URL
        e = self.endpoint
        query = {"driver": self.driver(), **dict(e.attributes)}
        return URL.create("mssql+pyodbc", username=e.user, password=e.password, host=e.host,
                          port=self.ports[0], database=e.database, query=query).render_as_string(hide_password=False)

    # --- SQL text --------------------------------------------------------------------------
    def render(self, template: str, **context: Any) -> list[str]:
        """`include/sql/mssql/<template>` into its statements, cut by the T-SQL-aware splitter
        (a ';' inside a literal, a bracketed name or a comment never ends a statement)."""
        text = _jinja(self.engine).get_template(template).render(
            q=self.q, qn=self.qualified, lit=self.lit, schema=self.schema,
            staging_schema=self.staging_schema, control_schema=self.control_schema,
            lock_timeout_seconds=self.lock_timeout_seconds, nstr=nstr, str=sstr, qc=quote_name, **context)
        return split_statements(text)

    def function_name(self, table: str) -> str:
        """The partition function setup creates for a new table: `pf_<schema>_<table>`. An existing
        table's function is the one the catalog names (TargetTable.function), whatever its name."""
        return object_name("pf", self.schema, self.checked(table))

    def scheme_name(self, table: str) -> str:
        return object_name("ps", self.schema, self.checked(table))

    @property
    def archive_schema(self) -> str:
        """Where `retire: archive` switches out the partitions that fall out of an append table's window."""
        return self.checked(f"{self.schema}_archive")

    def _key_type(self, table: Table) -> str | None:
        """The key's SQL type; None for an unpartitioned table without a key."""
        return next((c.sql_type(self.engine) for c in table.columns if c.name == table.key), None)

    def key(self, table: str | Table) -> KeyType:
        """The partition key's type: how its bounds are parsed and written as literals."""
        t = self.spec.table(table) if isinstance(table, str) else table
        return key_type(self._key_type(t))

    def columns(self, table: Table) -> list[dict[str, Any]]:
        """Name, type and nullability: SWITCH needs staging and target identical in all three."""
        return [{"name": c.name, "type": c.sql_type(self.engine), "nullable": c.nullable, "collation": None,
                 "sparse": False} for c in table.columns]

    def filegroups(self, plan: LoadPlan, used_pages: Mapping[str, int] | None = None) -> list[dict]:
        """Every stream's filegroup with its files, and the edge filegroup.

        Files are placed by `file_placement` (the filegroup's own folders, else `*`'s), else
        round-robin over `file_dirs`. Each file is sized for its share of the stream files
        the filegroup takes in this batch, times `file_headroom`, plus what it already holds
        (`used_pages`, read from the server at setup; none when only a script is written):
        a load then never waits for a file to grow.
        """
        # A table whose target has indexes builds them on each staging table before the switch:
        # the clustered index is a second copy of the rows until the heap is gone (the sort runs
        # in tempdb), so its streams need about their size again (index_room, set by the pre-flight).
        by_fg: dict[str, list[StreamPlan]] = {}
        for s in plan.all_streams():
            if s.partitioned and not s.empty:
                by_fg.setdefault(s.filegroup, []).append(s)
        used_pages = used_pages or {}
        out, index = [], 0
        for fg in sorted(by_fg, key=lambda n: (len(n), n)):
            streams = by_fg[fg]
            data = sum(math.ceil((s.bytes or 0) * self.index_room.get(s.table, 1.0)) for s in streams)
            share_mb = math.ceil(data * self.file_headroom / self.files_per_filegroup / MB)
            dirs = self.file_placement.get(fg) or self.file_placement.get("*")
            files = []
            for i in range(1, self.files_per_filegroup + 1):
                if dirs:
                    folder = dirs[(i - 1) % len(dirs)]
                else:
                    folder = self.file_dirs[index % len(self.file_dirs)]
                    index += 1
                name = f"{fg}_{i}"
                used_mb = math.ceil(used_pages.get(name, 0) * PAGE / MB)
                files.append(self._file(name, folder, max(MIN_FILE_MB, self.file_size_mb or 0, share_mb + used_mb),
                                        used_mb))
            out.append({"name": self.checked(fg), "files": files, "bytes": data, "size": _human(data), "edge": False,
                        "groups": [s.group_id for s in streams],
                        "unknown": [s.group_id for s in streams if s.bytes is None]})
        if by_fg:
            dirs = self.file_placement.get(EDGE_FILEGROUP) or self.file_placement.get("*") or self.file_dirs
            out.append({"name": EDGE_FILEGROUP, "edge": True, "files": [self._file(f"{EDGE_FILEGROUP}_1", dirs[0],
                                                                                   EDGE_FILE_MB, 0)],
                        "bytes": 0, "groups": [], "unknown": []})
        return out

    def _file(self, name: str, folder: str, size_mb: int, used_mb: int) -> dict[str, Any]:
        if self.file_max_size_mb is not None and size_mb > self.file_max_size_mb:
            raise TargetError(f"file {name} needs {size_mb} MB for this batch, over file_max_size_mb "
                              f"{self.file_max_size_mb}")
        # Growth is the safety net, not the plan: an eighth of the file, 64 MB .. 4 GB.
        growth = self.file_growth_mb or min(4096, max(64, math.ceil(size_mb / 8 / 64) * 64))
        sep = "\\" if "\\" in folder else "/"
        return {"name": self.checked(name), "path": f"{folder.rstrip(sep)}{sep}{self.database}_{name}.ndf",
                "size_mb": size_mb, "size_pages": size_mb * MB // PAGE, "growth_mb": growth, "used_mb": used_mb,
                "max_size": f"{self.file_max_size_mb}MB" if self.file_max_size_mb else "UNLIMITED"}

    def _table_context(self, plan_table) -> dict:
        t = plan_table.table
        streams = [s for s in plan_table.streams if not s.empty]
        ctx = {"name": t.name, "key": t.key, "key_type": self._key_type(t), "partitioned": t.partitioned,
               "columns": self.columns(t), "next_table": None if t.partitioned else self.next_table(t.name)}
        if t.partitioned and streams:
            key = self.key(t)
            # Every boundary the function needs, each with the filegroup of the partition it
            # closes (RANGE LEFT: a boundary is the largest value of the partition on its left):
            # each stream's largest key closes its own partition; the value just below a
            # stream's smallest key closes an empty partition on the edge filegroup, unless it
            # is the previous stream's largest key.
            closes = {key.value(s.upper): s.filegroup for s in streams}
            for s in streams:
                closes.setdefault(key.before(s.lower), EDGE_FILEGROUP)
            boundaries = [{"value": v, "sql": key.boundary(v), "filegroup": fg} for v, fg in sorted(closes.items())]
            ctx.update(function=self.function_name(t.name), scheme=self.scheme_name(t.name), boundaries=boundaries,
                       scheme_filegroups=[b["filegroup"] for b in boundaries] + [EDGE_FILEGROUP])
        else:
            ctx["partitioned"] = False
        return ctx

    def setup_sql(self, plan: LoadPlan, used_pages: Mapping[str, int] | None = None) -> list[str]:
        archive = any(t.table.mode == "append" and t.table.retire == "archive" for t in plan.tables)
        return self.render("setup.sql", filegroups=self.filegroups(plan, used_pages), headroom=self.file_headroom,
                           tables=[self._table_context(t) for t in plan.tables], edge_filegroup=EDGE_FILEGROUP,
                           archive=archive, archive_schema=self.archive_schema if archive else None,
                           publish_batch=self.spec.publish == "batch")

    def _bounds(self, stream: StreamPlan) -> dict[str, str]:
        if not stream.partitioned or stream.empty:
            return {"lower_sql": "", "upper_sql": ""}
        key = self.key(stream.table)
        return {"lower_sql": key.literal(stream.lower, start=True), "upper_sql": key.literal(stream.upper)}

    def prepare_sql(self, stream: StreamPlan, columns: list | None = None, filegroup: str | None = None,
                    compression: str = "NONE", checks: list | None = None) -> list[str]:
        """The staging table: by default from the spec on the stream's filegroup (a plan written
        without a server); at run time with the target's columns as the catalog has them, on the
        filegroup and with the data compression its partition will have (setup's plan), and the
        target's CHECK constraints (`checks`: catalog.Dependency rows, copied where check_copy
        takes their definition; the pre-flight refused the others)."""
        table = self.spec.table(stream.table)
        names = [c["name"] for c in (columns or self.columns(table))]
        copies = []
        for d in checks or []:
            definition = check_copy(d.detail, names)
            if definition is not None and not d.flag:
                copies.append({"name": staging_constraint_name(stream.staging_table, d.name),
                               "target_name": d.name, "definition": definition})
        return self.render("prepare.sql", s=stream, columns=columns or self.columns(table), key=table.key,
                           checks=copies,
                           filegroup=filegroup or stream.filegroup, compression=compression,
                           key_kind=self.key(table).kind if stream.partitioned else "integer", **self._bounds(stream))

    def server_path(self, path: Path) -> str:
        """The file's path as the server sees it: the local data root replaced by `server_data_root`."""
        local = Path(path).resolve() if Path(path).is_absolute() else (self.local_data_root / path).resolve()
        if not local.is_relative_to(self.local_data_root):
            raise TargetError(f"{local}: outside the data root {self.local_data_root}; BULK INSERT reads only "
                              f"files under it")
        relative = local.relative_to(self.local_data_root).parts
        # Without a mapping the server is taken to see the data root at the same path (one
        # volume mounted at the same place on both sides, as in the docker-compose stack).
        root = self.server_data_root or str(self.local_data_root)
        cls = PureWindowsPath if ("\\" in root or re.match(r"^[A-Za-z]:", root)) else PurePosixPath
        server = str(cls(root).joinpath(*relative))
        if not _SAFE_PATH.match(server):
            raise TargetError(f"{server}: the server path has characters that are not allowed in a load path")
        return server

    def truncate_sql(self, stream: StreamPlan) -> list[str]:
        return self.render("truncate.sql", s=stream)

    def codepage_for(self, fmt: FileFormat, server: tuple[str, int] | None = None) -> str | None:
        """BULK INSERT's CODEPAGE for a file format: the `codepage` setting, else the one of
        the file's encoding. `server` (platform, major version), once known: SQL Server on
        Linux takes CODEPAGE 'RAW' only (2019+; 2017 takes no CODEPAGE at all)."""
        if self.codepage:
            return self.codepage
        page = _encoding_codepage(fmt.encoding)
        if page and server and server[0] == "Linux":
            return "RAW" if server[1] >= 15 else None
        return page

    def load_path(self, stream: StreamPlan) -> tuple[str, str]:
        """How the stream's file reaches its staging table: ("bulk_insert", why) when the
        server can read it exactly, else ("tds", why): the worker reads it and sends the rows
        over TDS bulk copy (the client path)."""
        if self.load_mode == "tds":
            return "tds", "load_mode tds: the worker reads the file"
        table = self.spec.table(stream.table)
        fmt = table.format
        nullable = [c.name for c in table.columns if c.nullable]
        if stream.file.endswith(".gz"):
            return "tds", "the file is gzip-compressed and BULK INSERT reads plain files only"
        if nullable and fmt.null_marker not in (None, ""):
            return "tds", (f"the NULL marker {fmt.null_marker!r} of the nullable columns: BULK INSERT takes only "
                           "the empty field as NULL")
        if nullable and fmt.null_marker is None:
            return "tds", ("nullable columns without a NULL marker: BULK INSERT would make an empty field NULL, "
                           "where the spec says it is an empty string")
        if nullable and fmt.quoting == "csv":
            return "tds", ("CSV with nullable columns: BULK INSERT does not document whether a quoted empty field "
                           '("") is an empty string, as RFC 4180 and the spec have it, or NULL')
        if not self.codepage and _encoding_codepage(fmt.encoding) is None:
            return "tds", f"the encoding {fmt.encoding!r} has no code page BULK INSERT knows"
        return "bulk_insert", "BULK INSERT: the server reads the file"

    def load_sql(self, stream: StreamPlan, path: Path | None = None, guard: bool | None = None,
                 server: tuple[str, int] | None = None) -> list[str]:
        """bulk_insert: one batch (claim, TRUNCATE, BULK INSERT); the client path: the
        TRUNCATE before the copy."""
        if self.load_path(stream)[0] != "bulk_insert":
            return self.truncate_sql(stream)
        if path is None:
            path = self.local_data_root / self.script_batch / stream.file
        table = self.spec.table(stream.table)
        fmt = table.format
        # The trailing delimiter of every line is folded into the row terminator.
        terminator = (fmt.delimiter if fmt.trailing_delimiter else "") + ("\r\n" if fmt.line_end == "crlf" else "\n")
        shown = " + ".join(repr(ch) if ch.isprintable() else {"\r": "CR", "\n": "LF"}[ch] for ch in terminator)
        codepage = self.codepage_for(fmt, server)
        return self.render(
            "load.sql", s=stream, server_path=self.server_path(path), csv=fmt.quoting == "csv",
            field_terminator="'\\t'" if fmt.delimiter == "\t" else sstr(fmt.delimiter),
            row_terminator_sql="'0x0a'" if terminator == "\n" else None,
            row_terminator_expr=_nchar_expression(terminator), row_terminator_note=shown,
            first_row=fmt.header_lines + 1, codepage=codepage, codepage_note=_codepage_note(codepage),
            keepnulls=True,
            batch_size=self.batch_size, guard=self.scheduler_guard if guard is None else guard,
            busy_error=SCHEDULER_BUSY_ERROR, busy_message=SCHEDULER_BUSY_MESSAGE)

    def constraint_sql(self, stream: StreamPlan) -> list[str]:
        if not stream.partitioned:
            return []
        return self.render("constraint.sql", s=stream)

    def wait_minutes(self) -> int:
        return max(1, math.ceil(self.lock_timeout_seconds / 60))

    def switch_sql(self, stream: StreamPlan, replace_existing: bool) -> list[str]:
        """An unpartitioned table is replaced whole (`publish: table`), or its validated staging
        table becomes the table's next version (`publish: batch`: the batch's publish replaces
        the table's rows with it). A partitioned table's stream switches in with its table's
        commit (`commit_sql`, run by the table's last switch) or with the batch's publish
        (`publish_sql`); its own switch step builds the target's indexes on the staging table
        (`staging_index_sql`) and marks it ready."""
        columns = self.columns(self.spec.table(stream.table))
        if not stream.partitioned:
            if self.spec.publish == "batch":
                return self.render("stage_table.sql", s=stream, next_table=self.next_table(stream.table))
            return self.render("switch_table.sql", s=stream, columns=columns, commit_lock_wait_ms=self.commit_lock_wait_ms)
        return []

    def next_table(self, table: str) -> str:
        """An unpartitioned table's next version in the staging schema (`publish: batch`): its
        validated staging table, renamed. No staging table (`<table>_<stream>`) ends in letters."""
        return self.checked(f"{table}{NEXT_SUFFIX}")

    def staging_index_sql(self, stream: StreamPlan, indexes: list, filegroup: str,
                          compression: Mapping[str, str]) -> list[str]:
        """The target's indexes (catalog.IndexInfo) built on the stream's staging table."""
        names = {i.name: staging_constraint_name(stream.staging_table, i.name) for i in indexes if i.constraint}
        # Serial builds while the batch loads (step_parallelism, as on PostgreSQL).
        maxdop = 1 if self.step_parallelism == "serial" else None
        return self.render("staging_indexes.sql", s=stream, indexes=indexes, filegroup=filegroup,
                           compression=dict(compression), constraint_names=names, maxdop=maxdop)

    def catalog_sql(self, table: str) -> dict[str, str]:
        """The pre-flight's catalog queries for a table (values are parameters)."""
        (table_sql,) = self.render("catalog_table.sql")
        key = self.key(table)
        (boundaries_sql,) = self.render("catalog_boundaries.sql", key_type=self._key_type(self.spec.table(table)),
                                        as_text=key.base == "datetime2" and key.digits == 7)
        (partitions_sql,) = self.render("catalog_partitions.sql")
        (indexes_sql,) = self.render("catalog_indexes.sql")
        columns_sql, shared_sql = self.render("catalog_columns.sql")
        (batches_sql,) = self.render("partition_batches.sql")
        (dependencies_sql,) = self.render("catalog_dependencies.sql")
        return {"table": table_sql, "boundaries": boundaries_sql, "partitions": partitions_sql,
                "indexes": indexes_sql, "columns": columns_sql, "shared": shared_sql, "batches": batches_sql,
                "dependencies": dependencies_sql}

    def incoming(self, table_plan: TablePlan) -> list[Incoming]:
        key = self.key(table_plan.table)
        return [Incoming(stream=s.stream, lower=key.value(s.lower), upper=key.value(s.upper), filegroup=s.filegroup,
                         staging_table=s.staging_table, rows=s.rows)
                for s in table_plan.streams if s.partitioned and not s.empty]

    def window(self, table: str, target: TargetTable, streams: list[Incoming], batch: str) -> WindowPlan:
        """What the table's commit does with this batch (window.plan_window on the catalog's answers)."""
        t = self.spec.table(table)
        key = self.key(t)
        return plan_window(f"{self.schema}.{table}", t.mode, batch, target.partitions, streams, key,
                           keep=t.keep, keep_days=t.keep_days, archive=t.retire == "archive",
                           shared_with=target.shared_with, function=target.function or "",
                           archive_name=lambda p: partition_name(table, key.after(p.lower) if p.lower is not None
                                                                 else p.upper, p.upper))

    def new_target(self, table_plan: TablePlan) -> TargetTable:
        """The table as setup creates it for this batch (no server: a plan, the script): its
        function with the batch's boundaries, every partition empty."""
        ctx = self._table_context(table_plan)
        bounds = [b["value"] for b in ctx["boundaries"]]
        fgs = ctx["scheme_filegroups"]
        edges = [None, *bounds, None]
        parts = [Partition(number=i + 1, lower=edges[i], upper=edges[i + 1], filegroup=fgs[i], rows=0,
                           compression=(("(heap)", "NONE"),)) for i in range(len(fgs))]
        return TargetTable(exists=True, partitioned=True, data_space=ctx["scheme"], function=ctx["function"],
                           scheme=ctx["scheme"], partition_column=table_plan.table.key, boundaries=bounds,
                           partitions=parts, columns=[ColumnInfo(c["name"], c["type"], c["nullable"])
                                                      for c in self.columns(table_plan.table)])

    def commit_sql(self, table_plan: TablePlan, target: TargetTable | None = None, batch: str | None = None,
                   run: str | None = None) -> list[str]:
        """The table's commit: the batch switched in whole, in one transaction (commit_table.sql).
        Without `target` (no server: the script), against the table setup creates for the batch."""
        table = table_plan.table
        if not table.partitioned:
            return []
        target = target or self.new_target(table_plan)
        streams = self.incoming(table_plan)
        batch = self.lease_batch or self.script_batch if batch is None else batch
        wp = self.window(table.name, target, streams, batch)
        if not wp.ok:
            raise TargetError("\n".join(wp.problems), permanent=True)
        return self.render_commit(table.name, wp, target, streams, batch, run if run is not None else
                                  (self.lease_holder or ""))

    def render_commit(self, table: str, wp: WindowPlan, target: TargetTable, streams: list[Incoming], batch: str,
                      run: str) -> list[str]:
        """The table's own commit, one transaction (commit_table.sql, `publish: table`)."""
        return self.render("commit_table.sql", **self.commit_context(table, wp, target, streams), batch=batch, run=run,
                           wait_minutes=self.wait_minutes(), commit_lock_wait_ms=self.commit_lock_wait_ms,
                           commit_attempts=self.commit_attempts)

    def commit_context(self, table: str, wp: WindowPlan, target: TargetTable, streams: list[Incoming]) -> dict:
        """What a partitioned table's commit steps (_commit_steps.sql) are rendered from: the
        window's steps, the target's shape, the control rows."""
        key = self.key(table)
        steps = []
        for st in wp.steps:
            d: dict[str, Any] = {"kind": st.kind, "why": st.why,
                                 "value_sql": key.literal(st.value) if st.value is not None else "NULL",
                                 "range_sql": key.boundary(st.value) if st.value is not None else "NULL"}
            if st.partition is not None:
                d.update(number=st.partition.number, rows=st.partition.rows,
                         range=keys_text(st.partition.lower, st.partition.upper, key))
            if st.kind == "split":
                d["filegroup"] = st.filegroup
            elif st.kind == "archive":
                name = self.checked(st.archive_table)
                d.update(archive=self.qualified(self.archive_schema, name), filegroup=st.filegroup,
                         heap_compression=st.compression[0][1] if st.compression else "NONE",
                         compression=dict(st.compression),
                         constraint_names={i.name: staging_constraint_name(name, i.name)
                                           for i in target.indexes if i.constraint})
            elif st.kind == "switch_in":
                d.update(stream=st.stream.stream, filegroup=st.filegroup,
                         staging=self.qualified(self.staging_schema, st.stream.staging_table),
                         range=keys_text(key.before(st.stream.lower), st.stream.upper, key))
            steps.append(d)
        records = [{"key_min": show_key(s.lower), "key_max": show_key(s.upper), "rows": s.rows} for s in streams]
        gone = sorted({show_key(p.upper) for p in [*wp.removed, *wp.retired] if p.upper is not None}
                      | {r["key_max"] for r in records})
        return {"table": f"{self.schema}.{table}", "table_name": table, "mode": self.spec.table(table).mode,
                "steps": steps, "function": target.function, "scheme": target.scheme, "columns": target.columns,
                "indexes": target.indexes, "records": records, "gone": gone}

    def replace_context(self, stream: StreamPlan) -> dict:
        """What an unpartitioned table's replace in the batch's publish (_replace_steps.sql) is
        rendered from: its next version's rows into the table, checked against the manifest."""
        return {"partitioned": False, "table": f"{self.schema}.{stream.table}", "table_name": stream.table,
                "mode": "replace", "columns": self.columns(self.spec.table(stream.table)),
                "source": self.qualified(self.staging_schema, self.next_table(stream.table)), "rows": stream.rows}

    def render_publish(self, tables: list[dict], batch: str, run: str) -> list[str]:
        """Every table of the batch in one transaction (publish_batch.sql, `publish: batch`):
        `tables` in name order, each a partitioned table's `commit_context` (with "partitioned":
        True) or an unpartitioned one's `replace_context`."""
        return self.render("publish_batch.sql", tables=tables, batch=batch, run=run, wait_minutes=self.wait_minutes(),
                           commit_lock_wait_ms=self.commit_lock_wait_ms, commit_attempts=self.commit_attempts)

    def publish_sql(self, plan: LoadPlan, targets: Mapping[str, TargetTable] | None = None,
                    batch: str | None = None, run: str | None = None) -> list[str]:
        """The batch's publish: every table of the plan with a stream to load, in one transaction.
        Each partitioned table against `targets[name]` (the catalog's answers), or without it
        (no server: the script) against the table setup creates for the batch."""
        batch = self.lease_batch or self.script_batch if batch is None else batch
        run = self.lease_holder or "" if run is None else run
        tables = []
        for t in sorted(plan.tables, key=lambda t: t.table.name):
            loads = [s for s in t.streams if not s.empty]
            if not loads:
                continue
            if not t.table.partitioned:
                tables.append(self.replace_context(loads[0]))
                continue
            target = (targets or {}).get(t.table.name) or self.new_target(t)
            streams = self.incoming(t)
            wp = self.window(t.table.name, target, streams, batch)
            if not wp.ok:
                raise TargetError("\n".join(wp.problems), permanent=True)
            tables.append({"partitioned": True, **self.commit_context(t.table.name, wp, target, streams)})
        return self.render_publish(tables, batch, run) if tables else []

    def script(self, plan: LoadPlan) -> str:
        """The whole load as T-SQL for review, in execution order, one batch per GO."""
        out = [f"-- Switchyard load plan: spec {self.spec.name}, {plan.streams} streams, target mssql, "
               f"load mode {self.load_mode}",
               f"-- database {self.database}; {self._port_rule()}",
               f"USE {self.q(self.database)};", "GO", "", "-- objects"]

        def emit(statements: list[str]) -> None:
            for stmt in statements:
                out.append(stmt + ";")
                out.append("GO")

        emit(self.setup_sql(plan))
        for s in plan.all_streams():
            if s.empty:
                continue
            out.append(f"\n-- {s.group_id}: {s.file}, keys {s.key_min}..{s.key_max}, "
                       f"filegroup {s.filegroup}, port {self.port_for(s.stream)}")
            emit(self.prepare_sql(s))
            emit(self.load_sql(s))
            kind, why = self.load_path(s)
            if kind != "bulk_insert":
                # The client path: the worker reads the file (streamed, gzip decompressed on the
                # fly) and sends typed rows; nothing of it is T-SQL, so the plan says it here.
                out.append(f"-- load: TDS bulk copy from the worker of {s.file} into {self.staging_schema}."
                           f"{s.staging_table} (table lock, check constraints, batch size {self.batch_size}, "
                           f"packet size {self.packet_size}): {why}")
            emit(self.constraint_sql(s))
            emit(self.switch_sql(s, replace_existing=False))
            if s.partitioned:
                out.append(f"-- switch: the target's indexes built on {self.staging_schema}.{s.staging_table} "
                           f"(none on a table setup made from the spec), then the stream is marked ready; "
                           + ("the batch's publish moves it in with every table of the batch"
                              if self.spec.publish == "batch" else "the table's last switch runs the table's commit"))
        if self.spec.publish == "batch":
            publish = self.publish_sql(plan)
            if publish:
                out.append("\n-- publish_batch: once every group of the run is validated and staged, every table of "
                           "the batch goes in, in one transaction")
                emit(publish)
            return "\n".join(out) + "\n"
        for t in plan.tables:
            commit = self.commit_sql(t)
            if commit:
                out.append(f"\n-- {t.table.name}: its last switch moves the batch in whole")
                emit(commit)
        return "\n".join(out) + "\n"

    # --- connections ----------------------------------------------------------------------
    def connect_odbc(self, stream: int | None = None):
        """A pyodbc connection (autocommit) to the stream's pinned port."""
        import pyodbc
        # A pooled connection would keep its session, and with it a scheduler claim, alive.
        pyodbc.pooling = False
        port = self.port_for(stream) if stream else self.ports[0]
        try:
            return pyodbc.connect(self.odbc_connection_string(port), autocommit=True, timeout=self.login_timeout)
        except pyodbc.Error as exc:
            raise self._connect_error(port, exc) from exc

    def connect_tds(self, stream: int):
        """An mssql-python connection to the stream's pinned port (its bulk copy uses the same server)."""
        import mssql_python
        port = self.port_for(stream)
        try:
            return mssql_python.connect(self.tds_connection_string(port), autocommit=True,
                                        attrs_before={mssql_python.SQL_ATTR_LOGIN_TIMEOUT: self.login_timeout})
        except mssql_python.Error as exc:
            raise self._connect_error(port, exc) from exc

    def _connect_error(self, port: int, exc: BaseException) -> TargetError:
        """A failed connection; permanent when the server refused the login or the database
        (a retry would be refused the same way), else retryable (server down, network)."""
        refused = is_login_refused(exc)
        return TargetError(f"{'the target refused the connection' if refused else 'cannot connect to SQL Server'} "
                           f"at {self.endpoint.host},{port} (database {self.endpoint.database}): {_message(exc)}",
                           permanent=refused)

    @contextmanager
    def connection(self, stream: int | None = None) -> Iterator[Any]:
        conn = self.connect_odbc(stream)
        try:
            yield conn
        finally:
            conn.close()

    def execute(self, statements: list[str], stream: int | None = None) -> None:
        with self.connection(stream) as conn:
            cur = conn.cursor()
            for stmt in statements:
                cur.execute(stmt)
                drain(cur)

    def fetch(self, sql: str, params: tuple = (), stream: int | None = None) -> list[tuple]:
        with self.connection(stream) as conn:
            cur = conn.cursor()
            cur.execute(sql, *params)
            return [tuple(r) for r in cur.fetchall()]

    # --- the run lease (the shared logic is in base.py) -----------------------------------
    def _claim(self, cur) -> tuple:
        statement, = self.render("lease_claim.sql")
        p = self.lease_params()
        cur.execute(statement, p["schema"], p["holder"], p["batch"], p["ttl"])
        return first_row(cur)

    def claim_lease(self) -> tuple:
        import pyodbc
        try:
            with self.connection() as conn:
                return self._claim(conn.cursor())
        except pyodbc.Error as exc:
            if 208 in error_numbers(exc):  # invalid object name
                raise TargetError(f"{self.control_schema}.run_lease is missing: did setup.plan run?") from exc
            raise TargetError(f"renewing the run lease on {self.schema} failed: {_message(exc)}") from exc

    def drop_lease(self) -> None:
        statement, = self.render("lease_release.sql", schema_literal=None)
        with self.connection() as conn:
            drain(conn.cursor().execute(statement, self.schema, self.lease_holder))

    def lease(self) -> tuple | None:
        """(holder, batch, acquired_at, expires_at) of the schema's lease, if any."""
        rows = self.fetch(f"SELECT [holder], [batch], [acquired_at], [expires_at] FROM "
                          f"{self.qualified(self.control_schema, 'run_lease')} WHERE [target_schema] = ?",
                          (self.schema,))
        return rows[0] if rows else None

    # --- steps ----------------------------------------------------------------------------
    def recovery_model(self) -> str:
        return self.fetch("SELECT recovery_model_desc FROM sys.databases WHERE database_id = DB_ID()")[0][0]

    def recovery_state(self, cur=None) -> RecoveryState:
        """The database's recovery model, availability group, mirroring and log chain."""
        if cur is None:
            with self.connection() as conn:
                return self.recovery_state(conn.cursor())
        row = cur.execute(RECOVERY_SQL).fetchone()
        last = None
        try:
            last = cur.execute(LAST_LOG_BACKUP_SQL).fetchone()[0]
        except Exception as exc:  # msdb's history is optional: the login may not read it
            log.info("last log backup unknown (%s)", _message(exc))
        return RecoveryState.from_row(tuple(row), last)

    def used_pages(self, cur) -> dict[str, int]:
        """Pages each data file holds now (FILEPROPERTY SpaceUsed): files grow by what a batch adds."""
        return {name: int(pages or 0) for name, pages in cur.execute(USED_PAGES_SQL).fetchall()}

    def setup(self, plan: LoadPlan, problems: list[str] = ()) -> list[str]:
        """The run lease, the pre-flight (every table of the batch against the target as the
        catalog has it: refused with every problem, and the batch's own `problems` found before
        it, permanent, before anything is created), the
        missing objects, and each partitioned table's plan for this run (planned_partitions).
        Returns the pre-flight's notes."""
        import pyodbc
        with self.connection() as conn:
            cur = conn.cursor()
            load_bytes = sum(s.bytes or 0 for s in plan.all_streams() if not s.empty)
            advice = recovery_advice(self.recovery_state(cur), load_bytes)
            for line in advice.lines:
                (log.warning if advice.warning else log.info)("%s", line)
            # Concurrent runs would race on the IF NOT EXISTS checks: one at a time.
            cur.execute("EXEC sp_getapplock @Resource = N'switchyard.setup', @LockMode = N'Exclusive', "
                        "@LockOwner = N'Session', @LockTimeout = ?", self.lock_timeout_seconds * 1000)
            stmt = "(reading the files' used space)"
            try:
                # The lease first, in a transaction of its own: a run that must wait creates nothing.
                if self.lease_holder:
                    for stmt in self.render("lease.sql"):
                        cur.execute(stmt)
                        drain(cur)
                    try:
                        row = self._claim(cur)
                    except pyodbc.Error as exc:
                        raise TargetError(f"claiming the run lease on {self.schema} failed: "
                                          f"{_message(exc)}") from exc
                    self.check_lease(row)
                stmt = "(pre-flight: reading the target's catalog)"
                notes = self.preflight(cur, plan, problems)
                # The tables brought in line with the spec, as their on_spec_change allows (the
                # pre-flight refused everything else), before setup's IF NOT EXISTS objects.
                for stmt in self.spec_changes:
                    cur.execute(stmt)
                    drain(cur)
                for stmt in self.setup_sql(plan, used_pages=self.used_pages(cur)):
                    cur.execute(stmt)
                    drain(cur)
                stmt = "(recording this run's planned partitions)"
                for table_plan in plan.tables:
                    if table_plan.table.partitioned:
                        notes += self._plan_table(cur, table_plan)
            except pyodbc.Error as exc:
                raise TargetError(f"setup of {self.schema} failed: {_message(exc)}\nstatement:\n{stmt}") from exc
        for note in notes:
            log.info("pre-flight: %s", note)
        return notes

    def read_target(self, cur, table: str) -> TargetTable:
        """The table as the catalog has it now (the pre-flight's queries, catalog_*.sql)."""
        sql = self.catalog_sql(table)
        name = self.qualified(self.schema, table)
        key = self.key(table)
        rows = [tuple(r) for r in cur.execute(sql["table"], name).fetchall()]
        if not rows:
            return TargetTable(exists=False)
        function_id, parameter_type, scale = rows[0][2], rows[0][6], rows[0][9]
        # A function of another type (or another datetime2 precision) is refused by shape_problems;
        # its boundaries are not read as the key's values.
        same_type = (function_id is not None and str(parameter_type or "").lower() == key.base
                     and (key.base != "datetime2" or scale == key.digits))
        boundaries = [tuple(r) for r in cur.execute(sql["boundaries"], function_id).fetchall()] if same_type else []
        partitions = [tuple(r) for r in cur.execute(sql["partitions"], name).fetchall()]
        indexes = [tuple(r) for r in cur.execute(sql["indexes"], name).fetchall()]
        columns = [tuple(r) for r in cur.execute(sql["columns"], name).fetchall()]
        shared = ([tuple(r) for r in cur.execute(sql["shared"], function_id, name).fetchall()]
                  if function_id is not None else [])
        dependencies = [tuple(r) for r in cur.execute(sql["dependencies"], name).fetchall()]
        batches = []
        if cur.execute("SELECT OBJECT_ID(?, N'U')", self.qualified(self.control_schema, "partition_batches")
                       ).fetchone()[0] is not None:
            batches = [tuple(r) for r in cur.execute(sql["batches"], self.schema, table).fetchall()]
        return target_from_catalog(key, rows, boundaries, partitions, indexes, columns, shared, batches,
                                   dependency_rows=dependencies)

    def preflight(self, cur, plan: LoadPlan, batch_problems: list[str] = ()) -> list[str]:
        """Each table of the plan against the target as it is; TargetError (permanent) listing
        every problem, with the batch's own (`batch_problems`), before anything is created or
        loaded. Returns the notes."""
        notes, problems = [], list(batch_problems)
        self.spec_changes, self.spec_notes = [], []
        for table_plan in plan.tables:
            table = table_plan.table
            where = f"{self.schema}.{table.name}"
            target = self.read_target(cur, table.name)
            if not target.exists:
                notes.append(f"{where}: new table; setup creates it"
                             + (f" with this batch's {len(self.incoming(table_plan))} partitions on "
                                f"{self.function_name(table.name)}" if table.partitioned else ""))
                continue
            found = shape_problems(target, where, table, self.key(table) if table.partitioned else None,
                                   self._key_type(table))
            found += self._spec_differences(target, table, where)
            if target.indexes:
                self.index_room[table.name] = 2.0
            if table.partitioned and target.partitioned:
                more, said = dependency_findings(target, where, table)
                found += more
                notes += said
            elif not table.partitioned and not target.partitioned:
                # The replace empties it with TRUNCATE TABLE (_replace_steps.sql); the INSERT after
                # it checks the table's own constraints row by row.
                found += truncate_problems(target, where)
            problems += found
            if found:
                continue
            if not table.partitioned:
                problems += emptied_whole(table, table_plan.streams, where)
                continue
            streams = self.incoming(table_plan)
            if not streams:
                problems.append(f"{where}: every stream of the table is empty in this batch; in {table.mode} mode "
                                f"that would {'empty the table' if table.mode == 'replace' else 'add nothing'}. "
                                f"Leave the table out of this run (the tables param), or check the manifest")
                continue
            wp = self.window(table.name, target, streams, self.lease_batch or "")
            problems += wp.problems
            notes += wp.notes
        if problems:
            raise TargetError("pre-flight refused the batch before any load; nothing was changed:\n- "
                              + "\n- ".join(problems), permanent=True)
        return notes + self.spec_notes

    def _spec_differences(self, target: TargetTable, table, where: str) -> list[str]:
        """The table against the spec (core/spec_diff.py): the problems that refuse the batch;
        the statements its on_spec_change runs (`spec_changes`) and the notes (`spec_notes`)."""
        from switchyard.core.spec_diff import compare, reconcile
        from switchyard.targets.mssql import spec_change
        differences = compare(table, spec_change.existing_table(target), spec_change.needed(table),
                              spec_change.Statements(self, table))
        problems, notes, statements = reconcile(table, differences, where)
        self.spec_changes += statements
        self.spec_notes += notes
        return problems

    def _plan_table(self, cur, table_plan: TablePlan) -> list[str]:
        """This run's plan for a partitioned table: where each stream's partition will be
        (filegroup, data compression), in planned_partitions. Another run's plan still there (a
        run with a failed group) is discarded with its staging tables, and said so."""
        import json
        table = table_plan.table.name
        control = self.qualified(self.control_schema, "planned_partitions")
        notes = []
        others = cur.execute(f"SELECT DISTINCT run, batch FROM {control} WHERE target_schema = ? AND table_name = ? "
                             f"AND run <> ?", self.schema, table, self.lease_holder or "").fetchall()
        held = [r[0] for r in cur.execute(f"SELECT staging_table FROM {control} WHERE target_schema = ? AND "
                                          f"table_name = ? AND ready_at IS NOT NULL", self.schema, table).fetchall()]
        for run, batch in sorted(tuple(r) for r in others):
            notes.append(f"{self.schema}.{table}: batch {batch} (run {run or '(none)'}) never went in: its validated "
                         f"groups ({', '.join(held) or 'none'}) waited for the rest of its batch and are discarded "
                         f"now; to load batch {batch}, run it again from setup.plan")
        for (staging,) in cur.execute(f"SELECT staging_table FROM {control} WHERE target_schema = ? AND "
                                      f"table_name = ?", self.schema, table).fetchall():
            cur.execute(f"DROP TABLE IF EXISTS {self.qualified(self.staging_schema, self.checked(staging))}")
        cur.execute(f"DELETE FROM {control} WHERE target_schema = ? AND table_name = ?", self.schema, table)
        target = self.read_target(cur, table)
        streams = self.incoming(table_plan)
        wp = self.window(table, target, streams, self.lease_batch or "")
        if not wp.ok:  # the pre-flight passed a moment ago, under the same lock
            raise TargetError("pre-flight refused the batch before any load; nothing was changed:\n- "
                              + "\n- ".join(wp.problems), permanent=True)
        by_stream = {s.stream: s for s in table_plan.streams}
        for s in streams:
            fg, compression = wp.placement[s.stream]
            plan_s = by_stream[s.stream]
            cur.execute(f"INSERT INTO {control} (target_schema, table_name, staging_table, stream, batch, key_min, "
                        f"key_max, rows_planned, run, stream_filegroup, [filegroup], [compression], planned_at) "
                        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, SYSUTCDATETIME())",
                        self.schema, table, s.staging_table, s.stream, self.lease_batch or "", str(plan_s.lower),
                        str(plan_s.upper), s.rows, self.lease_holder or "", s.filegroup, fg,
                        json.dumps([list(c) for c in compression]))
        return notes

    def planned(self, cur, table: str) -> dict[str, dict]:
        """This table's planned partitions (setup's), by staging table name."""
        import json
        fields = ("staging_table", "stream", "batch", "key_min", "key_max", "rows_planned", "run",
                  "stream_filegroup", "filegroup", "compression", "ready_at")
        rows = cur.execute(f"SELECT {', '.join(self.q(f) for f in fields)} FROM "
                           f"{self.qualified(self.control_schema, 'planned_partitions')} "
                           f"WHERE target_schema = ? AND table_name = ? ORDER BY stream", self.schema, table).fetchall()
        out = {}
        for r in rows:
            d = dict(zip(fields, tuple(r)))
            d["compression"] = tuple(tuple(c) for c in json.loads(d["compression"]))
            out[d["staging_table"]] = d
        return out

    def create_staging(self, stream: StreamPlan) -> None:
        """The staging table with the target's columns as they are, on the filegroup and with the
        data compression its partition will have (setup's plan); from the spec where no plan is."""
        import pyodbc
        try:
            with self.connection(stream.stream) as conn:
                cur = conn.cursor()
                columns, filegroup, compression, checks = None, None, "NONE", []
                if stream.partitioned:
                    target = self.read_target(cur, stream.table)
                    mine = self.planned(cur, stream.table).get(stream.staging_table)
                    if target.exists and target.columns:
                        columns = [{"name": c.name, "type": c.type, "nullable": c.nullable,
                                    "collation": c.collation, "sparse": c.sparse} for c in target.columns]
                        checks = target.checks
                    if mine is not None and mine["run"] == (self.lease_holder or ""):
                        filegroup = mine["filegroup"]
                        compression = staging_heap_compression(mine["compression"])
                for stmt in self.prepare_sql(stream, columns=columns, filegroup=filegroup, compression=compression,
                                             checks=checks):
                    cur.execute(stmt)
                    drain(cur)
        except pyodbc.Error as exc:
            raise TargetError(f"prepare of {stream.group_id} failed: {_message(exc)}") from exc

    def session_stats(self, cur) -> dict[str, Any]:
        row = cur.execute(SESSION_STATS_SQL).fetchone()
        return dict(zip(_STAT_FIELDS, row)) if row else {}

    def load_staging(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        kind, why = self.load_path(stream)
        result = None
        if kind == "bulk_insert":
            try:
                result = self._load_bulk_insert(stream, path, progress)
            except _ClientPath as turn:
                why = str(turn)
        if result is None:
            result = self._load_tds(stream, path, progress)
        result.details["load_path"] = why
        return result

    def text_exact(self, stream: StreamPlan, server: tuple[str, int], code_pages: Mapping[str, int]) -> str | None:
        """None when BULK INSERT stores any text of the file exactly on this server, else why
        only ASCII is sure to arrive unchanged (ASCII is the same in every code page).

        Exact: a UTF-8 file read with CODEPAGE 65001 (Windows) into nchar/nvarchar columns and
        _UTF8-collated char/varchar ones (code page 65001); RAW (Linux) passes the bytes as
        they are, which only a _UTF8-collated char/varchar column holds as the same text; a
        single-byte file into columns of its own code page.
        """
        table = self.spec.table(stream.table)
        page = self.codepage_for(table.format, server)
        text = [c for c in table.columns if re.match(r"n?(var)?char|n?text", c.sql_type(self.engine).lower())]
        unicode = [c.name for c in text if c.sql_type(self.engine).lower().startswith("n")]
        single = {c.name: code_pages.get(c.name) for c in text if c.name not in unicode}
        if page == "65001":
            off = [f"{n} (code page {cp})" for n, cp in single.items() if cp not in (None, 65001)]
        elif page in ("RAW", None):
            off = [f"{n} (nchar/nvarchar)" for n in unicode]
            off += [f"{n} (code page {cp})" for n, cp in single.items() if cp not in (None, 65001)]
        else:
            off = [f"{n} (code page {cp})" for n, cp in single.items() if str(cp) != page]
            off += [] if page in ("1252", "28591") else [f"{n} (nchar/nvarchar)" for n in unicode]
        if not off:
            return None
        return (f"BULK INSERT with CODEPAGE {page or '(none)'} on {server[0]} stores it exactly only in _UTF8 or "
                f"matching columns, not in {', '.join(off)}")

    def server(self, cur) -> tuple[str, int]:
        """(Windows or Linux, major version): sys.dm_os_host_info (2017+; before it, Windows only)."""
        if self._server is None:
            try:
                platform, major = cur.execute(HOST_PLATFORM_SQL).fetchone()
                self._server = (str(platform), int(major))
            except Exception:
                self._server = ("Windows", 13)
        return self._server

    def _where(self, stream: StreamPlan) -> str:
        return (f" [table {stream.table}, stream {stream.stream}; staging table "
                f"{self.staging_schema}.{stream.staging_table} kept for inspection]")

    def _load_error(self, path: Path, stream: StreamPlan, exc: BaseException, line: str = "") -> TargetError:
        """A failed load as TargetError: permanent when the data is at fault, else retryable."""
        permanent = is_data_error(exc)
        hint = "" if permanent else " (not a data error: the task's retry starts the load again)"
        return TargetError(f"{path}: {line}{_message(exc)}{hint}{self._where(stream)}", permanent=permanent)

    def _load_bulk_insert(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        import pyodbc
        total = Path(path).stat().st_size
        staging = self.qualified(self.staging_schema, stream.staging_table)
        started = time.monotonic()

        checked: list[bool] = []

        def attempt(guard: bool) -> tuple[int, dict, dict, LoadWatcher]:
            conn = self.connect_odbc(stream.stream)
            watcher = None
            try:
                cur = conn.cursor()
                server = self.server(cur)
                if not checked and self.text_check:
                    # Text the server would not store exactly goes the client path (once per load).
                    code_pages = {n: int(p) for n, p in cur.execute(CODE_PAGES_SQL, staging).fetchall()
                                  if p is not None}
                    inexact = self.text_exact(stream, server, code_pages)
                    if inexact is not None and not file_is_ascii(Path(path)):
                        raise _ClientPath(f"the file holds non-ASCII text and {inexact}")
                    checked.append(True)
                statement, = self.load_sql(stream, path, guard=guard, server=server)
                try:
                    before = self.session_stats(cur)
                    # Another connection watches this session: how its batches are logged.
                    watcher = LoadWatcher(self, stream, staging, session_id=before.get("session_id"),
                                          every=self.watch_every)
                    watcher.start()
                    cur.execute(statement)
                    counts = drain(cur)
                    watcher.stop()
                    rows = next((c for c in reversed(counts) if c >= 0), -1)
                    if rows < 0:
                        rows = int(cur.execute(f"SELECT COUNT_BIG(*) FROM {staging}").fetchone()[0])
                    for stmt in self.constraint_sql(stream):
                        cur.execute(stmt)
                        drain(cur)
                    return rows, before, self.session_stats(cur), watcher
                except pyodbc.Error as exc:
                    if is_scheduler_busy(exc):
                        raise SchedulerBusy(_message(exc)) from exc
                    if NULL_REFUSED in error_numbers(exc) and any(not c.nullable for c in
                                                                  self.spec.table(stream.table).columns):
                        # An empty field in a NOT NULL column: BULK INSERT reads it as NULL
                        # (load.sql); the spec means '', which the client path stores.
                        raise _ClientPath(f"an empty field in a NOT NULL column, which BULK INSERT reads as NULL "
                                          f"({_message(exc)}); the client path loads it as an empty string") from exc
                    raise self._load_error(path, stream, exc) from exc
            finally:
                if watcher is not None:
                    watcher.stop()
                # Closing the unpooled session also releases its scheduler claim.
                conn.close()

        (rows, before, after, watcher), guard = with_scheduler_guard(attempt, self.scheduler_guard,
                                                                     self.guard_retries, stream.group_id)
        if progress:
            progress(total, total)
        details = _load_details(before, after, port=self.port_for(stream.stream), mode="bulk_insert")
        details.update(attempts=guard.attempts, scheduler_claimed=guard.claimed, scheduler_shared=guard.shared)
        details.update(load_logging(watcher.log_samples, self.batch_size, after.get("recovery_model")))
        return LoadResult(rows=rows, bytes=total, seconds=time.monotonic() - started, details=details)

    def code_pages(self, stream: StreamPlan) -> dict[str, int]:
        """Each character column's code page in the staging table (65001: a _UTF8 collation)."""
        return {name: int(page) for name, page in self.fetch(CODE_PAGES_SQL, (
            self.qualified(self.staging_schema, stream.staging_table),), stream.stream) if page is not None}

    def _load_tds(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        import mssql_python
        import pyodbc
        table = self.spec.table(stream.table)
        staging = self.qualified(self.staging_schema, stream.staging_table)
        started = time.monotonic()
        try:
            self.execute(self.load_sql(stream), stream.stream)
            code_pages = self.code_pages(stream)
        except pyodbc.Error as exc:
            raise self._load_error(path, stream, exc) from exc
        rows = FileRows(Path(path), table, self.engine, table.format, progress, context=self._where(stream),
                        code_pages=code_pages)
        watcher = LoadWatcher(self, stream, staging, every=self.watch_every)
        conn = self.connect_tds(stream.stream)
        watcher.start()
        try:
            cur = conn.cursor()
            # The record run's fast load: table lock, batches, large packets; constraints
            # checked row by row so the range CHECK stays trusted for SWITCH.
            result = cur.bulkcopy(staging, rows, batch_size=self.batch_size, timeout=0,
                                  table_lock=True, check_constraints=True)
        except TargetError:
            raise
        except Exception as exc:  # the driver may wrap an error raised by our row iterator
            if rows.error is not None:
                raise rows.error from exc
            # mssql-python's errors, and those of its Rust core (mssql_py_core: DB-API classes).
            if (isinstance(exc, (mssql_python.Error, RuntimeError, ValueError))
                    or type(exc).__module__.startswith("mssql_py")):
                raise self._load_error(path, stream, exc, line=f"line {rows.rows + 1} or before: ") from exc
            raise
        finally:
            conn.close()
            watcher.stop()
        if rows.error is not None:
            raise rows.error
        copied = int(result.get("rows_copied", rows.rows)) if isinstance(result, dict) else rows.rows
        try:
            self.execute(self.constraint_sql(stream), stream.stream)
        except pyodbc.Error as exc:
            raise self._load_error(path, stream, exc) from exc
        details = dict(watcher.sample or {})
        details.update(mode="tds", port=self.port_for(stream.stream), packet_size=self.packet_size,
                       batch_size=self.batch_size, parsed_rows=rows.rows,
                       session_sampled=watcher.sample is not None)
        details.update(load_logging(watcher.log_samples, self.batch_size, details.get("recovery_model")))
        return LoadResult(rows=copied, bytes=rows.bytes, seconds=time.monotonic() - started, details=details)

    def partition_number(self, stream: StreamPlan) -> int:
        """The stream's partition now, by the table's own function (RANGE LEFT: 1 + the
        boundaries below the stream's smallest key)."""
        key = self.key(stream.table)
        with self.connection() as conn:
            target = self.read_target(conn.cursor(), stream.table)
        return 1 + sum(1 for b in target.boundaries if b < key.value(stream.lower))

    def partition_rows(self, stream: StreamPlan) -> int:
        with self.connection() as conn:
            target = self.read_target(conn.cursor(), stream.table)
        key = self.key(stream.table)
        number = 1 + sum(1 for b in target.boundaries if b < key.value(stream.lower))
        return next((p.rows for p in target.partitions if p.number == number), 0)

    def constraint_trusted(self, stream: StreamPlan) -> bool | None:
        rows = self.fetch("SELECT is_not_trusted FROM sys.check_constraints "
                          "WHERE parent_object_id = OBJECT_ID(?) AND name = ?",
                          (self.qualified(self.staging_schema, stream.staging_table), f"{stream.staging_table}_range"))
        return None if not rows else not rows[0][0]

    def staging_exists(self, stream: StreamPlan) -> bool:
        return self.fetch("SELECT OBJECT_ID(?, N'U')",
                          (self.qualified(self.staging_schema, stream.staging_table),))[0][0] is not None

    def switched_in_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        key = self.key(table)
        return self.render("switched_in.sql", key_type=key.declared if key.kind == "timestamp" else self._key_type(table),
                           param="CONVERT(" + key.declared + ", ?, 126)" if key.kind == "timestamp" else "?")

    def switched_in(self, stream: StreamPlan) -> dict[str, Any] | None:
        """The stream's partition holding rows (its two boundaries in place); for an
        unpartitioned table, the table."""
        target = self.qualified(self.schema, stream.table)
        if not stream.partitioned:
            if self.spec.publish == "batch":
                # Validated and staged as the table's next version: the batch's publish moves it in.
                staged = self.fetch("SELECT OBJECT_ID(?, N'U')", (self.qualified(
                    self.staging_schema, self.next_table(stream.table)),))[0][0] is not None
                return {"partition": None, "in_target": False, "table_switched": False} if staged else None
            exists = self.fetch("SELECT OBJECT_ID(?, N'U')", (target,))[0][0] is not None
            return {"partition": None, "in_target": True} if exists else None
        statement, = self.switched_in_sql(stream)
        key = self.key(stream.table)
        rows = self.fetch(statement, (target, key.param(stream.lower, start=True), key.param(key.before(stream.lower)),
                                      key.param(stream.upper)))
        if not rows:
            return None
        number = int(rows[0][0])
        return {"partition_number": number, "partition": f"{self.schema}.{stream.table} partition {number}",
                "in_target": True}

    def switch_staging(self, stream: StreamPlan) -> dict[str, Any]:
        """Unpartitioned: the table replaced whole (`publish: table`), or its staging table made
        the table's next version (`publish: batch`). Partitioned: the target's indexes built on
        the staging table, then (under the table's commit lock) the stream marked ready; with
        `publish: table` the table's last switch commits the table's whole batch, with `publish:
        batch` the batch's publish does, every table at once (`in_target` says whether the
        partition is in now)."""
        import pyodbc
        where = f"{self.schema}.{stream.table}"
        try:
            if not stream.partitioned and self.spec.publish == "batch":
                # Nothing here touches the target: no lock to wait for, nothing to retry.
                self.execute(self.switch_sql(stream, replace_existing=True), stream.stream)
                return {"partition": None, "replaced": None, "already_switched": False, "in_target": False,
                        "table_switched": False, "waiting_for": []}
            if not stream.partitioned:
                with self.connection(stream.stream) as conn:
                    self._run_commit(conn.cursor(), stream.table, self.switch_sql(stream, replace_existing=True))
                return {"partition": None, "replaced": True, "in_target": True, "table_switched": True}
            built = self._build_target_indexes(stream)
            return {**self._stage(stream), **built}
        except pyodbc.Error as exc:
            text = _message(exc)
            if 1222 in error_numbers(exc) or "Lock request time out" in text:
                raise TargetError(f"switch of {stream.group_id} into {where}: {self.commit_attempts} attempts each "
                                  f"waited {self.commit_lock_wait_ms} ms for a lock (a long-running reader holds "
                                  f"the table); nothing was changed, retry later") from exc
            raise TargetError(f"switch of {stream.group_id} into {where} failed: {text}") from exc

    def prove_target_uniques(self, stream: StreamPlan) -> list[dict[str, Any]]:
        """The target's unique indexes (a DBA's: SQL Server makes none from the spec), checked on
        the staging table at validate: the target's indexes are built there now instead of at
        the switch (_build_target_indexes then finds them), and a duplicate fails the group's
        validation, naming the index and a few duplicated keys, before anything is published.
        The build fails at the first duplicate (Msg 1505); one GROUP BY per unique index, only
        then, finds which index and which keys. One result per unique index, as prove_unique's."""
        import pyodbc
        if not stream.partitioned:
            return []   # replaced whole by INSERT ... SELECT, which the table's own indexes check
        started = time.monotonic()
        with self.connection(stream.stream) as conn:
            cur = conn.cursor()
            uniques = [i for i in self.read_target(cur, stream.table).indexes if i.unique]
        if not uniques:
            return []
        failed = None
        try:
            self._build_target_indexes(stream)
        except pyodbc.Error as exc:
            if not error_numbers(exc) & DUPLICATE_KEY:
                raise
            failed = exc
        seconds = round(time.monotonic() - started, 4)
        staging = self.qualified(self.staging_schema, stream.staging_table)
        out = []
        for index in uniques:
            columns = [k for k, _ in index.keys]
            found = {"columns": columns, "index": f"{self.schema}.{index.name}", "scope": "table",
                     "duplicates": None, "seconds": seconds}
            if failed is not None:
                found["duplicates"] = self._duplicates(staging, columns, stream.stream, _message(failed))
            out.append(found)
        return out

    def _duplicates(self, staging: str, columns: list[str], stream: int, server: str) -> dict[str, Any] | None:
        """The keys of `columns` the staging table holds more than once, a few of them, or None."""
        cols = ", ".join(self.q(c) for c in columns)
        # Names are validated identifiers (the catalog's, checked by catalog._name), quoted.
        rows = self.fetch(f"SELECT TOP (5) {cols}, COUNT_BIG(*) AS n, COUNT_BIG(*) OVER () AS keys, "
                          f"SUM(COUNT_BIG(*) - 1) OVER () AS extra FROM {staging} GROUP BY {cols} "
                          f"HAVING COUNT_BIG(*) > 1 ORDER BY {cols}", (), stream)
        if not rows:
            return None
        return {"keys": int(rows[0][-2]), "extra_rows": int(rows[0][-1]),
                "examples": [{**{c: _plain(v) for c, v in zip(columns, r)}, "rows": int(r[len(columns)])}
                             for r in rows], "server": server}

    def _build_target_indexes(self, stream: StreamPlan) -> dict[str, Any]:
        """The target's indexes on the staging table, on its filegroup with the compression its
        partition has (setup's plan), before the commit: SWITCH then finds them equal, and the
        build runs per stream, in parallel, outside the table's lock. Idempotent: a retry finds
        them built (an index's name is the target's; a constraint's, see staging_constraint_name)."""
        started = time.monotonic()
        with self.connection(stream.stream) as conn:
            cur = conn.cursor()
            target = self.read_target(cur, stream.table)
            mine = self.planned(cur, stream.table).get(stream.staging_table)
            if not target.indexes or mine is None:
                return {"indexes_built": [], "index_seconds": 0.0}
            (indexes_sql,) = self.render("catalog_indexes.sql")
            present = {r[1] for r in cur.execute(indexes_sql, self.qualified(self.staging_schema,
                                                                             stream.staging_table)).fetchall()}
            names = {i.name: staging_constraint_name(stream.staging_table, i.name) for i in target.indexes}
            todo = [i for i in target.indexes if (names[i.name] if i.constraint else i.name) not in present]
            for stmt in self.staging_index_sql(stream, todo, mine["filegroup"], dict(mine["compression"])):
                cur.execute(stmt)
                drain(cur)
        seconds = round(time.monotonic() - started, 4)
        if todo:
            log.info("%s: built the target's %s on the staging table in %.2f s", stream.group_id,
                     ", ".join(i.name for i in todo), seconds)
        return {"indexes_built": [i.name for i in todo], "index_seconds": seconds}

    def _stage(self, stream: StreamPlan) -> dict[str, Any]:
        """Mark the stream ready; with `publish: table` the table's last one runs the table's
        commit, with `publish: batch` none does (the batch's publish moves every table in). One
        switch of a table at a time: a session application lock per table, held to the end of
        the commit."""
        where = f"{self.schema}.{stream.table}"
        control = self.qualified(self.control_schema, "planned_partitions")
        with self.connection(stream.stream) as conn:
            cur = conn.cursor()
            (lock,) = self.render("commit_lock.sql")
            drain(cur.execute(lock, f"switchyard.commit.{self.schema}.{stream.table}", self.lock_timeout_seconds * 1000))
            planned = self.planned(cur, stream.table)
            mine = planned.get(stream.staging_table)
            if mine is None or mine["run"] != (self.lease_holder or ""):
                first = next(iter(planned.values()), None)
                by = f"run {first['run'] or '(no run)'} (batch {first['batch']})" if first else "no run"
                raise TargetError(
                    f"switch of {stream.group_id}: {where} has no switch of this run pending: its plan was made by "
                    f"{by}. A group of an earlier run cannot switch into it; run this batch again from setup.plan "
                    f"(clear the whole run)", permanent=True)
            if (mine["key_min"], mine["key_max"]) != (str(stream.lower), str(stream.upper)):
                raise TargetError(f"switch of {stream.group_id}: setup planned keys {mine['key_min']}..{mine['key_max']}, "
                                  f"this group carries {stream.lower}..{stream.upper}; run the batch again from "
                                  f"setup.plan", permanent=True)
            cur.execute(f"UPDATE {control} SET ready_at = SYSUTCDATETIME() WHERE target_schema = ? AND table_name = ? "
                        f"AND staging_table = ? AND ready_at IS NULL", self.schema, stream.table, stream.staging_table)
            waiting = [p["staging_table"] for p in planned.values()
                       if p["ready_at"] is None and p["staging_table"] != stream.staging_table]
            result: dict[str, Any] = {"partition": f"{where} keys {stream.lower}..{stream.upper}", "replaced": None,
                                      "in_target": False, "table_switched": False, "waiting_for": waiting}
            if not waiting and self.spec.publish == "table":
                result.update(self._commit_table(cur, stream.table, planned))
                result["in_target"] = True
            return result

    def _archive_name(self, cur, name: str) -> str:
        for n in range(1000):
            candidate = self.checked(_free_name(name, n))
            if cur.execute("SELECT OBJECT_ID(?, N'U')", self.qualified(self.archive_schema, candidate)
                           ).fetchone()[0] is None:
                return candidate
        raise TargetError(f"{self.archive_schema}: no free name for {name}", permanent=True)

    def _commit_table(self, cur, table: str, planned: dict[str, dict]) -> dict[str, Any]:
        """The table's batch in whole: the window planned again from the catalog now (it must
        place every stream where setup planned it), then commit_table.sql, one transaction."""
        context, result, batch, run = self._commit_plan(cur, table, planned)
        self._run_commit(cur, table, self.render("commit_table.sql", **context, batch=batch, run=run,
                                                 wait_minutes=self.wait_minutes(),
                                                 commit_lock_wait_ms=self.commit_lock_wait_ms,
                                                 commit_attempts=self.commit_attempts))
        self._log_commit(table, result)
        return result

    def _log_commit(self, table: str, result: dict[str, Any]) -> None:
        log.info("%s.%s: batch %s switched in: %d partitions%s%s", self.schema, table, result["batch"],
                 result["partitions_in"], f"; replaced {len(result['removed'])}" if result["removed"] else "",
                 f"; retired {len(result['retired'])}" if result["retired"] else "")

    def _commit_plan(self, cur, table: str, planned: dict[str, dict]) -> tuple[dict, dict[str, Any], str, str]:
        """(the table's commit_context, its result, batch, run): the window planned again from the
        catalog now, which must place every stream where setup planned it; refuses otherwise."""
        key = self.key(table)
        rows = sorted(planned.values(), key=lambda p: p["stream"])
        batch, run = rows[0]["batch"], rows[0]["run"]
        streams = [Incoming(stream=p["stream"], lower=key.value(_planned_key(p["key_min"], key)),
                            upper=key.value(_planned_key(p["key_max"], key)), filegroup=p["stream_filegroup"],
                            staging_table=p["staging_table"], rows=p["rows_planned"]) for p in rows]
        target = self.read_target(cur, table)
        wp = self.window(table, target, streams, batch)
        if not wp.ok:
            raise TargetError(f"{self.schema}.{table}: the batch cannot go in now; nothing was switched:\n- "
                              + "\n- ".join(wp.problems), permanent=True)
        moved = [f"stream {p['stream']}: planned {p['filegroup']} {p['compression']}, now {wp.placement[p['stream']]}"
                 for p in rows if wp.placement.get(p["stream"]) != (p["filegroup"], p["compression"])]
        if moved:
            raise TargetError(f"{self.schema}.{table}: the table changed since setup.plan ({'; '.join(moved)}); "
                              f"nothing was switched: run the batch again from setup.plan", permanent=True)
        # A partition retired to the archive schema takes its range's name, or `<name>_<n>` when an
        # earlier retirement took it.
        wp.steps = [dataclasses.replace(st, archive_table=self._archive_name(cur, st.archive_table))
                    if st.kind == "archive" else st for st in wp.steps]
        result = {"table_switched": True, "batch": batch, "partitions_in": len(streams),
                  "removed": [keys_text(p.lower, p.upper, key) for p in wp.removed],
                  "retired": [keys_text(p.lower, p.upper, key) for p in wp.retired]}
        return self.commit_context(table, wp, target, streams), result, batch, run

    def _run_commit(self, cur, table: str, statements: list[str], what: str | None = None) -> float:
        """Run the table's commit (or, `what` naming it, the batch's publish); after a lock timeout
        (error 1222: a normal-priority Sch-M request waited commit_lock_wait_ms behind a reader, and
        the whole transaction rolled back), pause so the readers it held up go through, and run it
        again, commit_attempts times at most. Returns the seconds of the attempt that committed."""
        for attempt in range(1, self.commit_attempts + 1):
            began = time.monotonic()
            try:
                for stmt in statements:
                    cur.execute(stmt)
                    drain(cur)
                return time.monotonic() - began
            except Exception as exc:  # the driver's error (pyodbc.Error); anything but 1222 goes up as it is
                if 1222 not in error_numbers(exc) or attempt == self.commit_attempts:
                    raise
                log.info("%s: the %s waited %d ms for a lock held by a reader; nothing changed, attempt %d "
                         "of %d in %.1f s", what or f"{self.schema}.{table}", "publish" if what else "commit",
                         self.commit_lock_wait_ms, attempt, self.commit_attempts, self.commit_pause)
                time.sleep(self.commit_pause)

    # --- publish: batch: every table of the batch in one transaction -------------------------
    def publish_batch(self, streams: list[StreamPlan]) -> dict[str, Any]:
        """Every table of the batch in, in one transaction (`publish: batch`): readers see the
        previous batch or this one, across tables. `streams`: the run's plan for its tables.

        Refuses, changing nothing, unless every stream the plan loads was validated and staged
        (a partitioned table's stream marked ready in planned_partitions by this run's switch,
        an unpartitioned table's next version made): each stream that was not is named, with its
        rows in the manifest. Then one transaction (publish_batch.sql): each table's commit
        steps in name order, the window of each partitioned table planned again from the catalog
        now, under the same short LOCK_TIMEOUT and retry on error 1222 as a table's own commit.
        A retry whose earlier attempt committed finds nothing ready or pending of this run and
        this run's rows in partition_batches: it reports that."""
        holder = self.lease_holder or ""
        batch = self.lease_batch or ""
        by_table: dict[str, list[StreamPlan]] = {}
        for s in streams:
            by_table.setdefault(s.table, []).append(s)
        names = sorted(by_table)
        what = f"publish of batch {batch} into {self.schema}"
        started = time.monotonic()
        try:
            with self.connection() as conn:
                cur = conn.cursor()
                # No switch of these tables runs meanwhile: each table's commit lock, in name order.
                (lock,) = self.render("commit_lock.sql")
                for name in names:
                    drain(cur.execute(lock, f"switchyard.commit.{self.schema}.{name}", self.lock_timeout_seconds * 1000))
                planned = {name: {k: v for k, v in self.planned(cur, name).items() if v["run"] == holder}
                           for name in names if self.spec.table(name).partitioned}
                staged = {name: self._next_exists(cur, name) for name in names
                          if not self.spec.table(name).partitioned}
                if not any(planned.values()) and not any(staged.values()) and self._published_by(cur, names, holder):
                    return {"tables": names, "already_published": True, "lock_seconds": 0.0,
                            "seconds": round(time.monotonic() - started, 4), "by_table": {}}
                problems = self._publish_problems(by_table, planned, staged)
                if problems:
                    raise TargetError(f"publish of batch {batch} refused; no table of the batch was published, "
                                      f"every table keeps its previous contents:\n- " + "\n- ".join(problems),
                                      permanent=True)
                tables, results = [], {}
                for name in names:
                    loads = [s for s in by_table[name] if not s.empty]
                    if not loads:
                        continue
                    if name in planned:
                        context, results[name], _, _ = self._commit_plan(cur, name, planned[name])
                        tables.append({"partitioned": True, **context})
                    else:
                        tables.append(self.replace_context(loads[0]))
                        results[name] = {"table_switched": True, "rows": loads[0].rows}
                statements = self.render_publish(tables, batch, holder)
                transaction = self._run_commit(cur, "", statements, what=what)
        except TargetError:
            raise
        except Exception as exc:  # the driver's error, known by SQL Server's error number
            numbers = error_numbers(exc)
            if not numbers and type(exc).__module__.split(".")[0] != "pyodbc":
                raise
            if 1222 in numbers:
                raise TargetError(f"{what}: {self.commit_attempts} attempts each waited {self.commit_lock_wait_ms} ms "
                                  f"for a lock on one of {', '.join(names)} (a long-running reader holds it); "
                                  f"nothing was published, retry later") from exc
            raise TargetError(f"{what} failed: {_message(exc)}; nothing was published") from exc
        for name, result in results.items():
            if "partitions_in" in result:
                self._log_commit(name, result)
        # The locks are taken one table after another inside the transaction and held to its end:
        # `lock_seconds` is the committed attempt's whole run, the most the batch's first table held
        # its readers (the round trip included).
        return {"tables": names, "already_published": False, "by_table": results,
                "lock_seconds": round(transaction, 4), "seconds": round(time.monotonic() - started, 4)}

    def _next_exists(self, cur, table: str) -> bool:
        """Whether an unpartitioned table's next version is staged."""
        return cur.execute("SELECT OBJECT_ID(?, N'U')", self.qualified(self.staging_schema, self.next_table(table))
                           ).fetchone()[0] is not None

    def _published_by(self, cur, tables: list[str], holder: str) -> bool:
        """Whether this run's publish committed already: its rows in partition_batches."""
        control = self.qualified(self.control_schema, "partition_batches")
        return any(cur.execute(f"SELECT COUNT(*) FROM {control} WHERE target_schema = ? AND table_name = ? "
                               f"AND run = ?", self.schema, name, holder).fetchone()[0] for name in tables)

    def _publish_problems(self, by_table: dict[str, list[StreamPlan]], planned: dict[str, dict],
                          staged: dict[str, bool]) -> list[str]:
        """Every reason the batch cannot go in: a stream of the plan not validated and staged."""
        problems = []
        for name in sorted(by_table):
            where = f"{self.schema}.{name}"
            loads = [s for s in by_table[name] if not s.empty]
            if not loads:
                continue
            if name in staged:
                if not staged[name]:
                    problems.append(f"{where}: its stream ({stream_rows(loads[0])}) was not validated and switched in "
                                    f"this run")
                continue
            mine = planned[name]
            if not mine:
                problems.append(f"{where}: nothing of this run is pending (planned by another run, or published "
                                f"already)")
                continue
            problems += unstaged_problems(where, loads, lambda s: mine[s.staging_table]["ready_at"] is not None,
                                          lambda s: s.staging_table in mine)
        return problems

    def scheduler_count(self) -> int:
        return int(self.fetch(SCHEDULER_COUNT_SQL)[0][0])

    def server_layout(self) -> Layout:
        """The server's nodes, processor groups, CPUs and schedulers (LAYOUT_SQL, the query
        `plan --emit server-config` prints for a DBA to run)."""
        # FOR JSON hands a long document back cut into rows of about 2 KB: joined in order.
        return layout_from_json("".join(r[0] for r in self.fetch(LAYOUT_SQL)))

    def wait_stats_snapshot(self) -> dict[str, tuple]:
        return {r[0]: tuple(int(v) for v in r[1:]) for r in self.fetch(WAIT_STATS_SQL)}

    def latch_stats_snapshot(self) -> dict[str, tuple]:
        return {r[0]: tuple(int(v) for v in r[1:]) for r in self.fetch(LATCH_STATS_SQL)}

    def server_snapshot(self) -> dict:
        """Cumulative waits and latches now, as JSON types (lists, not tuples) for XCom."""
        return {"waits": {k: list(v) for k, v in self.wait_stats_snapshot().items() if k not in IDLE_WAITS},
                "latches": {k: list(v) for k, v in self.latch_stats_snapshot().items()}}

    def server_delta(self, before: dict, after: dict, top: int = 10) -> dict:
        return snapshot_delta(before, after, top)

    def row_count(self, table: str) -> int:
        return int(self.fetch(f"SELECT COUNT_BIG(*) FROM {self.qualified(self.schema, table)}")[0][0])

def staging_heap_compression(compression: Any) -> str:
    """The data compression of a staging heap, from its partition's (index, compression) pairs,
    heap or clustered index first. A heap target: the partition's own (SWITCH needs it equal). A
    clustered one: NONE, since the clustered index built on the heap before the switch rewrites
    every row with the partition's compression; a compressed heap would compress them twice."""
    first = tuple(compression[0]) if compression else ("(heap)", "NONE")
    return first[1] if first[0] == "(heap)" else "NONE"


def _free_name(name: str, n: int) -> str:
    return name if n == 0 else f"{name[:56]}_{n}"


def _planned_key(text: str, key: KeyType) -> Any:
    """A key kept as text in planned_partitions (the plan's JSON value)."""
    return int(text) if key.kind == "integer" else text


def _nchar_expression(text: str) -> str:
    """A T-SQL expression for `text`: printable runs as N'' literals, control characters as
    NCHAR(n), so no line break is ever written inside a literal."""
    parts, run = [], ""
    for ch in text:
        if ch.isprintable():
            run += ch
            continue
        if run:
            parts.append(nstr(run))
            run = ""
        parts.append(f"NCHAR({ord(ch)})")
    if run:
        parts.append(nstr(run))
    return " + ".join(parts)


class _ClientPath(Exception):
    """This load goes the client path after all; the message says why."""


def file_is_ascii(path: Path, chunk: int = 1 << 22) -> bool:
    """Whether every byte of the file is ASCII (read in 4 MB chunks, checked in C)."""
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            if not block.isascii():
                return False
    return True


def _encoding_codepage(encoding: str) -> str | None:
    try:
        return ENCODING_CODEPAGES.get(codecs.lookup(encoding).name)
    except LookupError:
        return None


def _codepage_note(codepage: str | None) -> list[str]:
    if codepage == "65001":
        text = ("CODEPAGE 65001: the file's UTF-8 text is converted to each column's code page; exact in "
                "nchar/nvarchar and _UTF8-collated columns (a character outside a single-byte column's code page "
                "cannot be stored exactly by any load). SQL Server on Linux takes CODEPAGE RAW only (2019+, none "
                "before): the loader uses that there.")
    elif codepage == "RAW":
        text = ("CODEPAGE RAW: no conversion, the file's bytes are stored as they are: exact for UTF-8 text in "
                "_UTF8-collated char/varchar columns and for ASCII in any.")
    elif codepage:
        text = f"CODEPAGE {codepage}: the file's text is converted from code page {codepage} to each column's."
    else:
        text = ("No CODEPAGE: the server's default (OEM on Windows); exact for ASCII text (SQL Server 2017 on "
                "Linux takes no CODEPAGE).")
    return textwrap.wrap(text, 86)


def _human(n: int) -> str:
    """Bytes for a reader: 3.1 MB, 7.2 GB."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def first_row(cur) -> tuple | None:
    """The first row of a batch's first result set (row counts of earlier statements are
    skipped), then the rest of the batch, whose errors surface only when read."""
    while cur.description is None:
        if not cur.nextset():
            return None
    row = cur.fetchone()
    drain(cur)
    return tuple(row) if row is not None else None


def drain(cur) -> list[int]:
    """Every row count of a batch; errors of later statements surface only when read."""
    counts = [cur.rowcount]
    while cur.nextset():
        counts.append(cur.rowcount)
    return counts

def plan_script(scale: float, streams: int, tables: list[str] | None = None, spec: str = "tpch",
                **options: Any) -> str:
    """The T-SQL of a TPC-H load planned from the generator's rules, for `plan --target mssql`."""
    from switchyard.core.spec import load_spec
    loaded = load_spec(spec)
    plan = plan_tpch(loaded, scale, streams, tables)
    return MssqlAdapter(loaded, **options).script(plan)

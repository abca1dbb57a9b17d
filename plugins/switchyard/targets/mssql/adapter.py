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
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Iterator, Mapping

from switchyard.core.keys import partition_name
from switchyard.core.planner import LoadPlan, StreamPlan, TablePlan, plan_tpch
from switchyard.core.spec import FileFormat, LoadSpec, Table
from switchyard.targets.base import LoadResult, ProgressCallback, TargetAdapter, TargetError, _jinja
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
from switchyard.targets.mssql.catalog import (ColumnInfo, TargetTable, shape_problems, staging_constraint_name,
                                              target_from_catalog)
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

class MssqlAdapter(TargetAdapter):
    engine = "mssql"
    quote_open = "["
    quote_close = "]"
    # The columns setup.sql adds to load_stats: where the load ran (session, scheduler, CPU,
    # soft-NUMA node, port), what it read and wrote, and how it was logged.
    load_stats_columns = ("session_id", "scheduler_id", "cpu_id", "node_id", "local_tcp_port", "reads", "writes",
                          "cpu_time_ms", "logging", "log_ratio")

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

    def _key_type(self, table: Table) -> str:
        return next(c.sql_type(self.engine) for c in table.columns if c.name == table.key)

    def key(self, table: str | Table) -> KeyType:
        """The partition key's type: how its bounds are parsed and written as literals."""
        t = self.spec.table(table) if isinstance(table, str) else table
        return key_type(self._key_type(t))

    def columns(self, table: Table) -> list[dict[str, Any]]:
        """Name, type and nullability: SWITCH needs staging and target identical in all three."""
        return [{"name": c.name, "type": c.sql_type(self.engine), "nullable": c.nullable, "collation": None}
                for c in table.columns]

    def filegroups(self, plan: LoadPlan, used_pages: Mapping[str, int] | None = None) -> list[dict]:
        """Every stream's filegroup with its files, and the edge filegroup.

        Files are placed by `file_placement` (the filegroup's own folders, else `*`'s), else
        round-robin over `file_dirs`. Each file is sized for its share of the stream files
        the filegroup takes in this batch, times `file_headroom`, plus what it already holds
        (`used_pages`, read from the server at setup; none when only a script is written):
        a load then never waits for a file to grow.
        """
        by_fg: dict[str, list[StreamPlan]] = {}
        for s in plan.all_streams():
            if s.partitioned and not s.empty:
                by_fg.setdefault(s.filegroup, []).append(s)
        used_pages = used_pages or {}
        out, index = [], 0
        for fg in sorted(by_fg, key=lambda n: (len(n), n)):
            streams = by_fg[fg]
            data = sum(s.bytes or 0 for s in streams)
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
               "columns": self.columns(t)}
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
            boundaries = [{"value": v, "sql": key.literal(v), "filegroup": fg} for v, fg in sorted(closes.items())]
            ctx.update(function=self.function_name(t.name), scheme=self.scheme_name(t.name), boundaries=boundaries,
                       scheme_filegroups=[b["filegroup"] for b in boundaries] + [EDGE_FILEGROUP])
        else:
            ctx["partitioned"] = False
        return ctx

    def setup_sql(self, plan: LoadPlan, used_pages: Mapping[str, int] | None = None) -> list[str]:
        archive = any(t.table.mode == "append" and t.table.retire == "archive" for t in plan.tables)
        return self.render("setup.sql", filegroups=self.filegroups(plan, used_pages), headroom=self.file_headroom,
                           tables=[self._table_context(t) for t in plan.tables], edge_filegroup=EDGE_FILEGROUP,
                           archive=archive, archive_schema=self.archive_schema if archive else None)

    def _bounds(self, stream: StreamPlan) -> dict[str, str]:
        if not stream.partitioned or stream.empty:
            return {"lower_sql": "", "upper_sql": ""}
        key = self.key(stream.table)
        return {"lower_sql": key.literal(stream.lower), "upper_sql": key.literal(stream.upper)}

    def prepare_sql(self, stream: StreamPlan, columns: list | None = None, filegroup: str | None = None,
                    compression: str = "NONE") -> list[str]:
        """The staging table: by default from the spec on the stream's filegroup (a plan written
        without a server); at run time with the target's columns as the catalog has them, on the
        filegroup and with the data compression its partition will have (setup's plan)."""
        table = self.spec.table(stream.table)
        return self.render("prepare.sql", s=stream, columns=columns or self.columns(table), key=table.key,
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
            keepnulls=fmt.null_marker == "" and any(c.nullable for c in table.columns),
            batch_size=self.batch_size, guard=self.scheduler_guard if guard is None else guard,
            busy_error=SCHEDULER_BUSY_ERROR, busy_message=SCHEDULER_BUSY_MESSAGE)

    def constraint_sql(self, stream: StreamPlan) -> list[str]:
        if not stream.partitioned:
            return []
        return self.render("constraint.sql", s=stream)

    def wait_minutes(self) -> int:
        return max(1, math.ceil(self.lock_timeout_seconds / 60))

    def switch_sql(self, stream: StreamPlan, replace_existing: bool) -> list[str]:
        """An unpartitioned table is replaced whole. A partitioned table's stream switches in with
        its table's commit (`commit_sql`, run by the table's last switch); its own switch step
        builds the target's indexes on the staging table (`staging_index_sql`) and marks it ready."""
        columns = self.columns(self.spec.table(stream.table))
        if not stream.partitioned:
            return self.render("switch_table.sql", s=stream, columns=columns)
        return []

    def staging_index_sql(self, stream: StreamPlan, indexes: list, filegroup: str,
                          compression: Mapping[str, str]) -> list[str]:
        """The target's indexes (catalog.IndexInfo) built on the stream's staging table."""
        names = {i.name: staging_constraint_name(stream.staging_table, i.name) for i in indexes if i.constraint}
        return self.render("staging_indexes.sql", s=stream, indexes=indexes, filegroup=filegroup,
                           compression=dict(compression), constraint_names=names)

    def catalog_sql(self, table: str) -> dict[str, str]:
        """The pre-flight's catalog queries for a table (values are parameters)."""
        (table_sql,) = self.render("catalog_table.sql")
        (boundaries_sql,) = self.render("catalog_boundaries.sql", key_type=self._key_type(self.spec.table(table)))
        (partitions_sql,) = self.render("catalog_partitions.sql")
        (indexes_sql,) = self.render("catalog_indexes.sql")
        columns_sql, shared_sql = self.render("catalog_columns.sql")
        (batches_sql,) = self.render("partition_batches.sql")
        return {"table": table_sql, "boundaries": boundaries_sql, "partitions": partitions_sql,
                "indexes": indexes_sql, "columns": columns_sql, "shared": shared_sql, "batches": batches_sql}

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
        key = self.key(table)
        steps = []
        for st in wp.steps:
            d: dict[str, Any] = {"kind": st.kind, "why": st.why,
                                 "value_sql": key.literal(st.value) if st.value is not None else "NULL"}
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
        return self.render("commit_table.sql", table=f"{self.schema}.{table}", table_name=table,
                           mode=self.spec.table(table).mode, batch=batch, run=run, steps=steps,
                           function=target.function, scheme=target.scheme, columns=target.columns,
                           indexes=target.indexes, records=records, gone=gone, wait_minutes=self.wait_minutes())

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
                           f"(none on a table setup made from the spec), then the stream is marked ready; the "
                           f"table's last switch runs the table's commit")
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

    def setup(self, plan: LoadPlan) -> None:
        import pyodbc
        with self.connection() as conn:
            cur = conn.cursor()
            load_bytes = sum(s.bytes or 0 for s in plan.all_streams() if not s.empty)
            advice = recovery_advice(self.recovery_state(cur), load_bytes)
            for line in advice.lines:
                (log.warning if advice.warning else log.info)("%s", line)
            # Concurrent runs would race on the IF NOT EXISTS checks and the SPLITs: one at a time.
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
                for stmt in self.setup_sql(plan, used_pages=self.used_pages(cur)):
                    cur.execute(stmt)
                    drain(cur)
            except pyodbc.Error as exc:
                raise TargetError(f"setup of {self.schema} failed: {_message(exc)}\nstatement:\n{stmt}") from exc

    def create_staging(self, stream: StreamPlan) -> None:
        import pyodbc
        try:
            self.execute(self.prepare_sql(stream), stream.stream)
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
        """The stream's partition now, by the function's own word."""
        return self.fetch(f"SELECT $PARTITION.{self.q(self.function_name(stream.table))}(?)",
                          (self.key(stream.table).value(stream.lower),))[0][0]

    def partition_rows(self, stream: StreamPlan) -> int:
        rows = self.fetch(
            "SELECT COALESCE(SUM(row_count), 0) FROM sys.dm_db_partition_stats "
            "WHERE object_id = OBJECT_ID(?) AND index_id IN (0, 1) AND partition_number = "
            f"$PARTITION.{self.q(self.function_name(stream.table))}(?)",
            (self.qualified(self.schema, stream.table), self.key(stream.table).value(stream.lower)))
        return int(rows[0][0])

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
        return self.render("switched_in.sql", function=self.function_name(stream.table),
                           key_type=self._key_type(table))

    def switched_in(self, stream: StreamPlan) -> dict[str, Any] | None:
        """The stream's partition holding rows (its two boundaries in place); for an
        unpartitioned table, the table."""
        target = self.qualified(self.schema, stream.table)
        if not stream.partitioned:
            exists = self.fetch("SELECT OBJECT_ID(?, N'U')", (target,))[0][0] is not None
            return {"partition": None} if exists else None
        statement, = self.switched_in_sql(stream)
        key = self.key(stream.table)
        rows = self.fetch(statement, (target, key.value(stream.lower), self.function_name(stream.table),
                                      key.before(stream.lower), key.value(stream.upper)))
        if not rows:
            return None
        number = int(rows[0][0])
        return {"partition_number": number, "partition": f"{self.schema}.{stream.table} partition {number}"}

    def switch_staging(self, stream: StreamPlan) -> dict[str, Any]:
        import pyodbc
        replace = stream.partitioned and self.partition_rows(stream) > 0
        try:
            self.execute(self.switch_sql(stream, replace_existing=replace), stream.stream)
        except pyodbc.Error as exc:
            text = _message(exc)
            if "1222" in str(exc) or "Lock request time out" in text:
                raise TargetError(f"switch of {stream.group_id} into {self.schema}.{stream.table} waited "
                                  f"{self.lock_timeout_seconds}s for a lock (a long-running reader holds the "
                                  f"table); nothing was changed, retry later") from exc
            raise TargetError(f"switch of {stream.group_id} into {self.schema}.{stream.table} failed: {text}") from exc
        out: dict[str, Any] = {"replaced": replace}
        if stream.partitioned:
            out["partition_number"] = self.partition_number(stream)
            out["partition"] = f"{self.schema}.{stream.table} partition {out['partition_number']}"
        return out

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

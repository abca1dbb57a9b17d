"""SQL Server's T-SQL for each step: filegroups and files, the staging table and its CHECK, the load's
BULK INSERT, the switch, rendered from targets/mssql/templates/. Nothing here connects."""
from __future__ import annotations

import codecs
import math
import re
import textwrap
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Mapping

from switchyard.core.planner import LoadPlan, StreamPlan
from switchyard.core.spec import FileFormat, Table
from switchyard.targets.base import TargetError
from switchyard.targets.templates import environment
from switchyard.targets.mssql.catalog import check_copy, staging_constraint_name
from switchyard.targets.mssql.guard import SCHEDULER_BUSY_ERROR, SCHEDULER_BUSY_MESSAGE
from switchyard.targets.mssql.keys import KeyType, key_type
from switchyard.targets.mssql.settings import _SAFE_PATH, EDGE_FILEGROUP
from switchyard.targets.mssql.tsql import nstr, quote_name, split_statements, sstr
from switchyard.targets.mssql.window import object_name

MB = 1 << 20
PAGE = 8192  # sys.database_files.size and FILEPROPERTY(..., 'SpaceUsed') count 8-KB pages
MIN_FILE_MB = 64
EDGE_FILE_MB = 8  # the edge partitions stay empty: the staging tables' CHECKs keep rows out
# Python's codec name of a file's encoding -> BULK INSERT's CODEPAGE (ASCII is the same in
# every code page: RAW, no conversion).
ENCODING_CODEPAGES = {"utf-8": "65001", "iso8859-1": "28591", "cp1252": "1252", "ascii": "RAW"}
# An unpartitioned table's next version in the staging schema (`publish: batch`): `<table>__next`.
NEXT_SUFFIX = "__next"
# The empty table a commit switches an empty partition out to, to take the table's Sch-M lock at
# low priority before its TRUNCATE, SPLIT or MERGE (commit_sql.py): `<table>__lock`.
LOCK_SUFFIX = "__lock"
# The empty table an unpartitioned table's rows are switched out to when its next version is
# switched in (_swap_steps.sql), dropped with the commit: `<table>__old`.
OLD_SUFFIX = "__old"


class MssqlSql:
    """The statements of each step, rendered for one table or stream of the spec."""

    # --- SQL text --------------------------------------------------------------------------
    def render(self, template: str, **context: Any) -> list[str]:
        """The engine's `<template>` (templates/) into its statements, cut by the T-SQL-aware splitter
        (a ';' inside a literal, a bracketed name or a comment never ends a statement)."""
        text = environment(self.templates).get_template(template).render(
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
        return next((self.column_type(c) for c in table.columns if c.name == table.key), None)

    def key(self, table: str | Table) -> KeyType:
        """The partition key's type: how its bounds are parsed and written as literals."""
        t = self.spec.table(table) if isinstance(table, str) else table
        return key_type(self._key_type(t))

    def columns(self, table: Table) -> list[dict[str, Any]]:
        """Name, type and nullability: SWITCH needs staging and target identical in all three."""
        return [{"name": c.name, "type": self.column_type(c), "nullable": c.nullable, "collation": None,
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
        staged = not stream.partitioned and self.spec.publish == "batch"
        return self.render("prepare.sql", s=stream, columns=columns or self.columns(table), key=table.key,
                           checks=copies, next_table=self.next_table(stream.table) if staged else None,
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

    def switch_sql(self, stream: StreamPlan, replace_existing: bool, target: Any = None) -> list[str]:
        """An unpartitioned table is replaced whole (`publish: table`): its staging table switched
        in when `target` (swap_target: the table, made to whose shape the staging table was) is
        given, else its rows copied in; or its validated staging table becomes the table's next
        version (`publish: batch`: the batch's publish replaces the table's rows with it). A
        partitioned table's stream switches in with its table's commit (`commit_sql`, run by the
        table's last switch) or with the batch's publish (`publish_sql`); its own switch step
        builds the target's indexes on the staging table (`staging_index_sql`) and marks it ready."""
        columns = self.columns(self.spec.table(stream.table))
        if not stream.partitioned:
            if self.spec.publish == "batch":
                return self.render("stage_table.sql", s=stream, next_table=self.next_table(stream.table))
            swap = None if target is None else self.swap_context(stream.table, target, lock_first=True)
            return self.render("switch_table.sql", s=stream, columns=columns, swap=swap,
                               commit_lock_wait_ms=self.commit_lock_wait_ms, wait_minutes=self.wait_minutes())
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
        """The pre-flight's catalog queries for a table (values are parameters). The boundaries'
        query only for a partitioned table: it converts them to the partition key's type, and a
        table loaded whole may have a text key or none."""
        out = {}
        (out["table"],) = self.render("catalog_table.sql")
        spec_table = self.spec.table(table)
        if spec_table.partitioned:
            key = self.key(spec_table)
            (out["boundaries"],) = self.render("catalog_boundaries.sql", key_type=self._key_type(spec_table),
                                               as_text=key.base == "datetime2" and key.digits == 7)
            (out["leftover"],) = self.render("catalog_leftover.sql")
        (out["partitions"],) = self.render("catalog_partitions.sql")
        (out["indexes"],) = self.render("catalog_indexes.sql")
        out["columns"], out["shared"], out["schemes"] = self.render("catalog_columns.sql")
        (out["batches"],) = self.render("partition_batches.sql")
        (out["dependencies"],) = self.render("catalog_dependencies.sql")
        return out

    def switched_in_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        key = self.key(table)
        return self.render("switched_in.sql", key_type=key.declared if key.kind == "timestamp" else self._key_type(table),
                           param="CONVERT(" + key.declared + ", ?, 126)" if key.kind == "timestamp" else "?")


def staging_heap_compression(compression: Any) -> str:
    """The data compression of a staging heap, from its partition's (index, compression) pairs,
    heap or clustered index first. A heap target: the partition's own (SWITCH needs it equal). A
    clustered one: NONE, since the clustered index built on the heap before the switch rewrites
    every row with the partition's compression; a compressed heap would compress them twice."""
    first = tuple(compression[0]) if compression else ("(heap)", "NONE")
    return first[1] if first[0] == "(heap)" else "NONE"


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

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

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from switchyard.core.planner import plan_tpch
from switchyard.core.spec import LoadSpec
from switchyard.targets.base import TargetAdapter, TargetError
from switchyard.targets.mssql.commit import MssqlCommit
from switchyard.targets.mssql.commit_sql import MssqlCommitSql
from switchyard.targets.mssql.load import MssqlLoad
from switchyard.targets.mssql.preflight import MssqlPreflight
from switchyard.targets.mssql.server import MssqlServer
from switchyard.targets.mssql.session import MssqlSession
from switchyard.targets.mssql.settings import ADAPTER_OPTIONS, Endpoint, Settings, parse_settings, parse_uri
from switchyard.targets.mssql.sql import MssqlSql


class MssqlAdapter(MssqlSql, MssqlCommitSql, MssqlSession, MssqlServer, MssqlPreflight, MssqlLoad, MssqlCommit,
                   TargetAdapter):
    """The SQL Server target: its flags and how it is made (from a URI, an Airflow connection or
    for a script); each step's work is in the module of its concern (the mixins above)."""

    engine = "mssql"
    display_name = "SQL Server"
    templates = Path(__file__).resolve().parent / "templates"
    default_port = 1433
    default_database = "switchyard"   # settings.parse_connection's, where the connection names none
    quote_open = "["
    quote_close = "]"
    # The columns setup.sql adds to load_stats: where the load ran (session, scheduler, CPU,
    # soft-NUMA node, port), what it read and wrote, and how it was logged.
    load_stats_columns = ("session_id", "scheduler_id", "cpu_id", "node_id", "local_tcp_port", "reads", "writes",
                          "cpu_time_ms", "logging", "log_ratio")

    def column_type(self, column) -> str:
        from switchyard.targets.mssql.types import column_type
        return column_type(column, self.dialect)

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
        return cls(spec, schema=schema, base_port=args.base_port, port_count=nodes, ports=ports,
                   script_batch=cls._batch_name(getattr(args, "batch", None)))

    @staticmethod
    def _batch_name(folder: str | None) -> str:
        """The batch a script of `--batch <folder>` loads and records: the folder's path under
        the data root ("2026-10-01", "tpch/sf1"), or its own name when it is elsewhere; without
        a folder, `batch`."""
        if not folder:
            return "batch"
        from pathlib import Path
        from switchyard.core.batch import data_root
        path = Path(folder).resolve()
        try:
            return path.relative_to(data_root().resolve()).as_posix()
        except ValueError:
            return path.name

    @classmethod
    def plan_arguments(cls, group: Any) -> None:
        from switchyard.targets.mssql.server_config import MAX_NODES
        group.add_argument("--nodes", type=int, default=None,
                           help=f"without --layout: pinned ports (default: the stream count, at most {MAX_NODES}; "
                                "stream k uses port base + (k - 1) mod nodes)")
        group.add_argument("--layout", help="the server's CPU layout, a JSON file of what the layout query prints on "
                                            "the server (sys.dm_os_nodes, sys.dm_os_schedulers), or NODESxCPUS such "
                                            "as 2x48; ports, node masks and processor groups come from it")
        group.add_argument("--soft-numa", type=int, default=None, metavar="CPUS",
                           help="cut each hardware node into soft-NUMA nodes of CPUS CPUs, one port each "
                                "(default: one port per node as the server has it, no soft-NUMA change)")
        group.add_argument("--affinity", default=None, metavar="CPU_IDS",
                           help="also restrict the whole instance to these CPU ids (e.g. 0-47,64-111); never "
                                "emitted unless given")
        group.add_argument("--base-port", type=int, default=2000, help="the first pinned port (default 2000)")

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


def plan_script(scale: float, streams: int, tables: list[str] | None = None, spec: str = "tpch",
                **options: Any) -> str:
    """The T-SQL of a TPC-H load planned from the generator's rules, for `plan --target mssql`."""
    from switchyard.core.spec import load_spec
    loaded = load_spec(spec)
    plan = plan_tpch(loaded, scale, streams, tables)
    return MssqlAdapter(loaded, **options).script(plan)

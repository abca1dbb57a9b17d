"""The `switchyard` command (also `python -m switchyard`).

Product commands live here: `generate`, `manifest`, `check`, `plan`, `pool sync`, `config`. Other packages add
commands through the `switchyard.commands` entry-point group: each entry point names a
function `register(subparsers)` that adds one sub-command (the development tooling adds
`demo`, `db`, `services`, `screenshots` and `airflow` this way). This module never imports
them by name.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from importlib.metadata import entry_points
from pathlib import Path

COMMANDS_GROUP = "switchyard.commands"
# Where `pool sync` finds the Airflow it talks to when AIRFLOW_HOME is not set: a function
# returning that Airflow's environment (the development tooling's local Airflow).
AIRFLOW_ENVIRONMENT_GROUP = "switchyard.airflow_environment"
DAG_SETTINGS_GROUP = "switchyard.dag_settings_file"



def _tables(value: str | None) -> list[str] | None:
    return [t.strip() for t in value.split(",") if t.strip()] if value else None


def cmd_generate(args) -> int:
    from switchyard.core.datagen import generate
    from switchyard.core.spec import SpecError, load_spec
    from switchyard.settings import data_root
    try:
        spec = load_spec(args.spec)
        name = args.batch or f"{spec.name}-sf{args.scale:g}-s{args.streams}"
        manifest = generate(data_root() / name, spec, args.scale, args.streams, _tables(args.tables), seed=args.seed)
    except (SpecError, ValueError) as exc:
        sys.exit(f"generate: {exc}")
    print(f"{data_root() / name}: {len(manifest.entries)} files, {sum(e.bytes for e in manifest.entries):,} bytes, "
          f"{sum(e.rows for e in manifest.entries):,} rows")
    return 0


def _batch_folder(value: str) -> Path:
    """A batch given as a folder path, or as a batch name under the data root."""
    from switchyard.core.batch import BatchError, resolve_batch
    from switchyard.settings import data_root
    path = Path(value).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.is_absolute() or value.startswith((".", "~")):
        raise BatchError(f"{path}: no such batch folder")
    folder = resolve_batch(value, data_root())
    if not folder.is_dir():
        raise BatchError(f"{folder}: no such batch folder (batch {value!r} under the data root, "
                         f"SWITCHYARD_DATA_ROOT={data_root()})")
    return folder


def cmd_manifest(args) -> int:
    """Write a batch folder's manifest.json from its files, every record read."""
    from switchyard.core.batch import MANIFEST, BatchError, describe_batch, write_manifest
    from switchyard.core.spec import SpecError, load_spec
    try:
        spec = load_spec(args.spec)
        folder = _batch_folder(args.folder)
        manifest = describe_batch(folder, spec, _tables(args.tables))
    except (SpecError, BatchError) as exc:
        sys.exit(f"manifest: {exc}")
    if (folder / MANIFEST).exists() and not args.force and not args.dry_run:
        sys.exit(f"manifest: {folder / MANIFEST} exists; --force replaces it (a run may be loading the batch)")
    for e in manifest.entries:
        keys = f", keys {e.key_min}..{e.key_max}" if e.key_min is not None else ""
        print(f"  {e.file}: {e.bytes:,} bytes, {e.rows:,} rows{keys}")
    if args.dry_run:
        return 0
    path = write_manifest(folder, manifest)
    files = len(manifest.entries)
    print(f"{path}: {files} file{'' if files == 1 else 's'}, {sum(e.rows for e in manifest.entries):,} rows")
    return 0


def cmd_check(args) -> int:
    """Check a batch without loading it: every file's problems at once (a file's first five bad
    fields named, the rest counted), exit status 1 if any."""
    from switchyard.core.batch import MANIFEST, BatchError, check_batch, read_manifest, tables_in_batch
    from switchyard.core.spec import SpecError, load_spec
    try:
        spec = load_spec(args.spec)
        folder = _batch_folder(args.batch)
    except (SpecError, BatchError) as exc:
        sys.exit(f"check: {exc}")
    problems = check_batch(folder, spec, _tables(args.tables)) + _wider_than_the_dag(folder, spec, args)
    if problems:
        print(f"{folder}: {len(problems)} problem{'s' if len(problems) > 1 else ''}; a run would refuse the "
              f"batch before any load:", file=sys.stderr)
        for p in problems:
            print(f"- {p}", file=sys.stderr)
        if not (folder / MANIFEST).exists():
            # Its files are read against the manifest's entries: without one nothing else is checked.
            print(f"the files were not read: a run reads the batch once its producer wrote {MANIFEST}, last. "
                  f"To write one from the files as they are (every record read, the batch refused with each "
                  f"problem found): switchyard manifest --spec {shlex.quote(args.spec)} {shlex.quote(str(folder))}",
                  file=sys.stderr)
        return 1
    manifest = read_manifest(folder, spec)
    # What was read: the tables asked for (--tables), or the manifest's every one.
    asked = _tables(args.tables)
    entries = [e for e in manifest.entries if not asked or e.table in asked]
    tables = sorted({e.table for e in entries})
    left = sorted({e.table for e in manifest.entries} - set(tables))
    print(f"{folder}: OK: {len(entries)} file{'s' if len(entries) != 1 else ''} of {len(tables)} "
          f"table{'s' if len(tables) != 1 else ''} ({', '.join(tables)}), {sum(e.rows for e in entries):,} rows, "
          f"each file read and matching its manifest entry"
          + (f"; not read (not asked for): {', '.join(left)}" if left else ""))
    # What the check cannot judge without the target: a table with no rows in the batch, which a
    # run refuses where the target already has it (core/preflight.check_table).
    empty = sorted(t for t in tables if spec.table(t).partitioned and not any(e.rows for e in entries if e.table == t))
    for note in tables_in_batch(folder, manifest, spec, asked or spec.table_names)[1]:
        print(f"note: {note}")
    for t in empty:
        mode = spec.table(t).mode
        if spec.table(t).allow_empty:
            print(f"note: every stream of {t} is empty in this batch: a run adds nothing to it (allow_empty: true)")
            continue
        print(f"note: every stream of {t} is empty in this batch: a run refuses that where the target already has "
              f"{t} ({mode} mode: it would {'empty the table' if mode == 'replace' else 'add nothing'}); if that is "
              f"meant, {'declare allow_empty: true on it, or ' if mode == 'append' else ''}leave {t} out of the run "
              f"(its tables param, --tables here)")
    return 0


def _wider_than_the_dag(folder: Path, spec, args) -> list[str]:
    """The run's own refusal of a batch with more streams of a table than the DAG has task groups
    for, where the DAG this command speaks to (its settings file: `switchyard config`) loads this
    spec; nothing where it loads another or the manifest is not there to read."""
    from switchyard import settings
    from switchyard.core.batch import MANIFEST, BatchError, read_manifest
    from switchyard.core.spec import SpecError, load_spec
    from switchyard.steps import wider_than_the_dag
    env = dag_settings_environment()
    current = settings.Settings.from_env(env)
    try:
        if not (folder / MANIFEST).exists() or load_spec(current.spec).name != spec.name:
            return []
    except (SpecError, OSError):
        return []   # the DAG's own spec does not load: its parse says so, not this check
    tables = _tables(args.tables) or list(spec.table_names)
    try:
        manifest = read_manifest(folder, spec)
    except BatchError:
        return []   # check_batch names what is wrong with the manifest
    return wider_than_the_dag(manifest, tables, current.streams, settings.settings_file(env))


def cmd_plan(args) -> int:
    from switchyard.core.spec import SpecError, load_spec
    from switchyard.targets import adapter_class, engines
    try:
        spec = load_spec(args.spec)
    except SpecError as exc:
        sys.exit(f"plan: {exc}")
    plan = _plan(args, spec)
    args.streams = plan.streams  # a batch's own stream count when planned from its manifest
    engine = adapter_class(args.target)
    layout = getattr(args, "layout", None)
    if not engine.plans_ports and (args.emit == "server-config" or layout):
        sys.exit(f"--emit server-config and --layout map ports to the server's nodes, which {args.target} does not "
                 f"(--target {', '.join(e for e in engines() if adapter_class(e).plans_ports)})")
    ports = None
    if engine.plans_ports and (args.emit == "server-config" or layout):
        text, ports = engine.plan_ports(args)
        if args.emit == "server-config":
            print(text, end="")
            return 0
    from switchyard.targets import TargetError
    try:
        adapter = engine.for_script(spec, args.schema, args, ports=ports)
        script = adapter.script(plan)
    except TargetError as exc:
        # A plan the target cannot take (a key the type does not hold, streams that would share
        # a partition): said as such, never as a traceback.
        sys.exit(f"plan: {exc}")
    print(script, end="")
    return 0


def _plan(args, spec):
    """The plan `plan` prints: from a batch's manifest (any spec), or, for TPC-H, from the
    generator's rules at a scale and stream count (no data needed)."""
    from switchyard.core.planner import PlanError, plan_batch, plan_tpch
    if args.batch:
        from switchyard.core.batch import BatchError, read_manifest
        try:
            # A folder, or a batch name under the data root, as `check` and `manifest` take it.
            return plan_batch(spec, read_manifest(_batch_folder(args.batch), spec), _tables(args.tables))
        except (BatchError, PlanError) as exc:
            sys.exit(f"plan: {exc}")
    if spec.generator != "tpch":
        sys.exit(f"plan: {spec.source}: key ranges without data are known for the TPC-H generator only; plan "
                 f"this spec from a batch: --batch <folder with manifest.json>")
    if args.scale is None or args.streams is None:
        sys.exit("plan: give --scale and --streams (TPC-H from the generator's rules) or --batch <folder>")
    return plan_tpch(spec, args.scale, args.streams, _tables(args.tables), producer=args.producer)


def airflow_environment() -> dict[str, str]:
    """The Airflow this command speaks to: the environment's own when AIRFLOW_HOME is set
    (a container, a user's Airflow); else the one an installed package provides through the
    `switchyard.airflow_environment` entry point (the project's local Airflow); else Airflow's
    default home."""
    if os.environ.get("AIRFLOW_HOME"):
        return dict(os.environ)
    for entry in sorted(entry_points(group=AIRFLOW_ENVIRONMENT_GROUP), key=lambda e: e.name):
        return entry.load()()
    return dict(os.environ)


def dag_settings_environment() -> dict[str, str]:
    """This shell's environment naming the DAG settings file of the Airflow this command speaks
    to, nothing started or migrated: the environment's own when it names one (AIRFLOW_HOME,
    SWITCHYARD_SETTINGS_FILE), else the file an installed package provides through the
    `switchyard.dag_settings_file` entry point (the project's local Airflow's)."""
    from switchyard import settings
    if os.environ.get("AIRFLOW_HOME") or settings.names_settings_file():
        return dict(os.environ)
    for entry in sorted(entry_points(group=DAG_SETTINGS_GROUP), key=lambda e: e.name):
        return {**os.environ, "SWITCHYARD_SETTINGS_FILE": str(entry.load()())}
    return dict(os.environ)


def cmd_pool(args) -> int:
    """Size the load pool from the target server: its load slots (schedulers / cores) x
    SWITCHYARD_POOL_PER_SLOT; the target's slot guard keeps one bulk load per slot."""
    env = airflow_environment()
    os.environ.update(env)
    from switchyard.airflow.connections import ConnectionMissing, adapter_for, bridge_connection
    from switchyard.core.spec import load_spec
    from switchyard.targets import TargetError
    try:
        bridge_connection(args.conn_id)
    except ConnectionMissing:
        sys.exit(f"pool sync: no Airflow connection {args.conn_id!r} (create it first: README, 'Pointing it at your own database')")
    try:
        adapter = adapter_for(args.conn_id, load_spec(args.spec))
        slots = adapter.scheduler_count()
    except TargetError as exc:
        sys.exit(f"pool sync: {exc}")
    if slots < 1:
        sys.exit(f"pool sync: the server reports {slots} schedulers")
    size = adapter.pool_size(args.per_slot)
    description = (f"Switchyard: load tasks of {args.conn_id}, {size} for its {slots} {adapter.engine} "
                   f"schedulers / cores (the target runs one bulk load per slot at a time)")
    print(f"{args.conn_id} ({adapter.engine}): {slots} schedulers -> pool {args.pool} = {size} slots"
          + (f" ({size / slots:g} load tasks per server slot)" if size != slots else ""))
    pools = [(args.pool, description)]
    if args.prepare_pool:
        # As big as the load pool: a prepare ahead of each load the pool admits.
        print(f"  and pool {args.prepare_pool} = {size} slots (the prepare steps)")
        pools.append((args.prepare_pool, f"Switchyard: prepare tasks of {args.conn_id}, as many as its load pool"))
    if args.dry_run:
        return 0
    # In this process, as `airflow pools set` does it (Airflow's own pool model, in the metadata
    # database of the environment above): an `airflow` process per pool cost seconds each.
    from airflow.models.pool import Pool
    for name, text in pools:
        try:
            Pool.create_or_update_pool(name=name, slots=size, description=text, include_deferred=False)
        except Exception as exc:  # noqa: BLE001 - any database error ends the command, named
            sys.exit(f"pool sync: setting pool {name} in Airflow's metadata database failed: {exc}")
    return 0


def cmd_config(args) -> int:
    from switchyard import settings
    if args.markdown:
        print(settings.markdown(), end="")
        return 0
    # As the DAG's processes read them: the settings file of the Airflow this command speaks to
    # (the local Airflow's in a checkout, where the shell does not name one).
    current = settings.Settings.from_env(dag_settings_environment())
    for item in settings.SETTINGS:
        print(f"{item.variable}={settings.render(getattr(current, item.field))}")
    # Other packages' settings (the local stack's ports and paths, with the development tooling
    # installed): this shell's value, else the default; one derived from elsewhere is described.
    for item, value in settings.registered_values():
        if value or item.default_text is None:
            print(f"{item.variable}={value or settings.render(item.default)}")
        else:
            print(f"# {item.variable} unset: {item.default_text.replace('`', '')}")
    return 0


def build_parser(extensions: bool = True) -> argparse.ArgumentParser:
    from switchyard import settings
    # The defaults of the DAG's settings (its spec, schema, connection, pools): the DAG's settings
    # file of the Airflow this command speaks to, as the DAG is built from it.
    try:
        dag = settings.Settings.from_env(dag_settings_environment())
    except settings.SettingsError:
        dag = settings.get()    # the file does not read: the DAG's parse says why
    parser = argparse.ArgumentParser(
        prog="switchyard",
        description="Parallel, validated, partition-switched bulk loads of flat-file extracts, run by Airflow.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    p = sub.add_parser("generate", help="generate a batch (TPC-H, or the shop example) with its manifest "
                                        "under the data root",
                       description="Generate a batch of a built-in spec's generator (TPC-H from tpchgen-cli, or "
                                   "the shop example's messy CSV) in streams, with the manifest the DAG plans "
                                   "from, under the data root (SWITCHYARD_DATA_ROOT).")
    p.add_argument("--spec", default="tpch", help="a built-in spec with a generator: tpch (default) or shop")
    p.add_argument("--scale", type=float, default=0.1,
                   help="scale factor (TPC-H: 1 = about 1 GB; shop: 1 = 1.5 million events; default 0.1)")
    p.add_argument("--streams", type=int, default=4, help="streams: one file per table per stream (default 4)")
    p.add_argument("--batch", help="batch folder name (default <spec>-sf<scale>-s<streams>)")
    p.add_argument("--tables", help="comma-separated subset of the tables (default: all)")
    p.add_argument("--seed", type=int, default=None, help="shop: the seed its rows follow from (default 1)")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("manifest", help="write a batch folder's manifest.json from its files",
                       description="Describe a batch folder for its producer: each table's streams as the spec's "
                                   "files pattern finds them, each file's bytes, rows and smallest and largest "
                                   "key (every record read), written to manifest.json last and atomically. "
                                   "Refuses overlapping key ranges and missing streams, naming the files.")
    p.add_argument("folder", help="the batch folder (a path, or a batch name under the data root)")
    p.add_argument("--spec", required=True, help="built-in spec name or path of a spec file")
    p.add_argument("--tables", help="comma-separated subset of the tables (default: all)")
    p.add_argument("--dry-run", action="store_true", help="print what it finds, write nothing")
    p.add_argument("--force", action="store_true", help="replace an existing manifest.json")
    p.set_defaults(func=cmd_manifest)

    p = sub.add_parser("check", help="check a batch against its spec without loading anything",
                       description="Check a batch as a run's first step would, and more, without a server: "
                                   "the manifest, the plan (key ranges, streams), the files (there, of their "
                                   "size), and every file read against its manifest entry (rows, keys). Prints "
                                   "every file's problems at once (a file's first five bad fields by line and "
                                   "column, the rest counted); exit status 1 if there is any.")
    p.add_argument("--batch", required=True, help="the batch folder (a path, or a batch name under the data root)")
    p.add_argument("--spec", required=True, help="built-in spec name or path of a spec file")
    p.add_argument("--tables", help="comma-separated subset of the tables, as a run's `tables` param "
                                    "(default: every table of the spec, as a run without it)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("plan", help="print the SQL of a load, in execution order, without a server",
                       description="Print the load's statements in execution order (objects, then per stream: "
                                   "prepare, load, switch), without a server: from a batch's manifest "
                                   "(--batch), or for TPC-H from the generator's rules (--scale, --streams).")
    from switchyard.targets.registry import adapter_class, engines
    p.add_argument("--target", choices=list(engines()), default=engines()[0],
                   help=f"the engine whose SQL to print (default {engines()[0]})")
    p.add_argument("--scale", type=float, help="TPC-H scale factor the plan is for (planned from the generator's "
                                               "rules, no data needed)")
    p.add_argument("--streams", type=int, help="TPC-H stream count the plan is for")
    p.add_argument("--batch", help="plan from this batch's manifest.json instead, a folder or a batch name under "
                                   "the data root (any spec: the key ranges and streams the producer recorded)")
    p.add_argument("--tables", help="comma-separated subset of the tables (default: all)")
    p.add_argument("--spec", default=dag.spec, help="built-in spec name or path of a spec file (default: the DAG's, "
                                                    f"SWITCHYARD_SPEC, now {dag.spec})")
    p.add_argument("--schema", default=dag.schema,
                   help="target schema (default: the DAG's, SWITCHYARD_SCHEMA, from this shell or the DAG's settings "
                        f"file, the local Airflow's where this shell names none; now {dag.schema}); the plan's first "
                        f"line names it")
    p.add_argument("--producer", choices=["tpchgen-cli", "dbgen"], default="tpchgen-cli",
                   help="the generator whose file split the key ranges follow (default tpchgen-cli)")
    p.add_argument("--emit", choices=["sql", "server-config"], default="sql",
                   help="sql: the load's statements in order; server-config: the instance's port, soft-NUMA and "
                        "affinity settings for pinned loads (an engine that pins each stream to a port)")
    # Each engine's own options (SQL Server's port plan), in a group of their own.
    for name in engines():
        try:
            engine = adapter_class(name)
        except Exception:  # noqa: BLE001 - an installed engine that does not import: `plan --target` says why
            continue
        # An engine's own options, once: a flavour of an engine reads its parent's.
        if "plan_arguments" in vars(engine):
            engine.plan_arguments(p.add_argument_group(f"--target {name}"))
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("pool", help="size the Airflow load pool from the target server's schedulers",
                       description="Set the Airflow pool the loads run in from the target's load slots "
                                   "(SQL Server: visible online schedulers; PostgreSQL: the connection's "
                                   "copy_slots, else cores) x SWITCHYARD_POOL_PER_SLOT.")
    p.add_argument("action", choices=["sync"], help="sync: read the server, then set the pool")
    p.add_argument("--conn-id", default=dag.conn_id,
                   help="the target's Airflow connection (default: SWITCHYARD_CONN_ID or switchyard_target)")
    p.add_argument("--pool", default=dag.pool,
                   help="the pool the loads run in (default: SWITCHYARD_POOL or switchyard_loads)")
    # Read as the setting is: none, off or empty for no prepare pool.
    p.add_argument("--prepare-pool", default=dag.prepare_pool, type=settings._optional,
                   help="also set this pool, the prepare steps', to the load pool's size (default: "
                        "SWITCHYARD_PREPARE_POOL; none: only the load pool)")
    p.add_argument("--spec", default="tpch", help="built-in spec name or path of a spec file (default tpch)")
    p.add_argument("--per-slot", type=float, default=None,
                   help="load tasks per server slot (default: SWITCHYARD_POOL_PER_SLOT, "
                        f"{settings.render(settings.get().pool_per_slot)}); 1 = one per slot")
    p.add_argument("--dry-run", action="store_true", help="print the size, leave the pool alone")
    p.set_defaults(func=cmd_pool)

    p = sub.add_parser("config", help="the SWITCHYARD_* settings in effect, or their reference",
                       description="Print every SWITCHYARD_* setting with the value in effect here "
                                   "(environment or default).")
    p.add_argument("--markdown", action="store_true",
                   help="print the configuration reference (docs/configuration.md) instead")
    p.set_defaults(func=cmd_config)

    if extensions:
        for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
            try:
                entry.load()(sub)
            except Exception as exc:  # a broken extension must not take the product's commands with it
                print(f"switchyard: command {entry.name!r} from {entry.value} is unavailable: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # The output's reader went away (`switchyard runs | head -1`): what it wanted was printed.
        # Python's own flush at exit would fail again on the closed pipe: point stdout elsewhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

-- Objects a load needs, created only when missing: safe on every run. Each statement is
-- its own batch (GO in the script), so none relies on a variable of another.
-- How the loads will be logged. Minimal logging needs the SIMPLE or BULK_LOGGED recovery
-- model (every load here takes TABLOCK on an empty heap). Nothing here changes the model:
-- an availability database or a mirrored one must stay in FULL, and FULL -> SIMPLE would
-- break a log backup chain (FULL -> BULK_LOGGED keeps it). A log chain exists when
-- sys.database_recovery_status.last_log_backup_lsn is not NULL.
DECLARE @logging nvarchar(400) = CASE
    WHEN EXISTS (SELECT 1 FROM sys.databases WHERE database_id = DB_ID() AND replica_id IS NOT NULL)
        THEN N'switchyard: availability database, FULL recovery: every load is fully logged and sent to every secondary; keep the model, size the log for the load'
    WHEN EXISTS (SELECT 1 FROM sys.database_mirroring WHERE database_id = DB_ID() AND mirroring_guid IS NOT NULL)
        THEN N'switchyard: mirrored database, FULL recovery: every load is fully logged and sent to the mirror; keep the model'
    WHEN (SELECT recovery_model_desc FROM sys.databases WHERE database_id = DB_ID()) <> N'FULL'
        THEN N'switchyard: SIMPLE or BULK_LOGGED recovery: the loads are minimally logged'
    WHEN (SELECT last_log_backup_lsn FROM sys.database_recovery_status WHERE database_id = DB_ID()) IS NOT NULL
        THEN N'switchyard: FULL recovery with a log backup chain: the loads are fully logged; BULK_LOGGED for the load window keeps the chain, SIMPLE would break it'
    ELSE N'switchyard: FULL recovery without a log backup chain: the loads are fully logged'
END
PRINT @logging;
{% for fg in filegroups %}
{% if loop.first %}
-- One filegroup per stream: a staging table and its partition must share a filegroup for
-- SWITCH, and separate filegroups spread allocation (PFS/GAM) contention over their files.
-- Files are created at the size this batch needs (the stream files' bytes times the
-- headroom {{ headroom }}, plus what a file already holds), so no load waits for a file to
-- grow; FILEGROWTH is only the safety net. Creating or growing a data file writes no
-- zeros when the service account holds "Perform volume maintenance tasks" (instant file
-- initialization, sys.dm_server_services.instant_file_initialization_enabled).
{% endif %}
{% if fg.edge %}
-- {{ fg.name }}: the empty partitions below the first stream and above the last (and in
-- gaps between streams), on a small filegroup of their own rather than on PRIMARY.
{% else %}
-- {{ fg.name }}: {{ fg.files | length }} file(s) for {{ fg.size }} of stream files ({{ fg.groups | join(", ") }}){% if fg.unknown %}; sizes unknown for {{ fg.unknown | join(", ") }}{% endif %}.
{% endif %}
IF NOT EXISTS (SELECT 1 FROM sys.filegroups WHERE name = {{ nstr(fg.name) }})
    ALTER DATABASE CURRENT ADD FILEGROUP {{ q(fg.name) }};
{% for f in fg.files %}
{% if fg is sameas filegroups[0] and loop.first %}
-- A filegroup holds tables only once it has a file. ALTER DATABASE CURRENT (2012+) keeps
-- the database name out of the script.
{% endif %}
IF NOT EXISTS (SELECT 1 FROM sys.database_files WHERE name = {{ nstr(f.name) }})
    ALTER DATABASE CURRENT ADD FILE (NAME = {{ nstr(f.name) }}, FILENAME = {{ nstr(f.path) }}, SIZE = {{ lit(f.size_mb) }}MB, MAXSIZE = {{ f.max_size }}, FILEGROWTH = {{ lit(f.growth_mb) }}MB) TO FILEGROUP {{ q(fg.name) }};
{% if fg is sameas filegroups[0] and loop.first %}
-- A file made by an earlier batch grows to this batch's size before any load; only ever
-- up (MODIFY FILE refuses a size at or below the current one, error 5039), and
-- sys.database_files.size counts 8-KB pages.
{% endif %}
IF (SELECT size FROM sys.database_files WHERE name = {{ nstr(f.name) }}) < {{ lit(f.size_pages) }}
    ALTER DATABASE CURRENT MODIFY FILE (NAME = {{ nstr(f.name) }}, SIZE = {{ lit(f.size_mb) }}MB);
{% endfor %}
{% endfor %}
-- CREATE SCHEMA must be alone in its batch, hence EXEC of a constant string.
IF SCHEMA_ID({{ nstr(schema) }}) IS NULL EXEC (N'CREATE SCHEMA {{ q(schema) }}');
IF SCHEMA_ID({{ nstr(staging_schema) }}) IS NULL EXEC (N'CREATE SCHEMA {{ q(staging_schema) }}');
{% include "lease.sql" %}
{% if archive %}
-- Retired partitions of append tables (retire: archive) are switched out to tables here.
IF SCHEMA_ID({{ nstr(archive_schema) }}) IS NULL EXEC (N'CREATE SCHEMA {{ q(archive_schema) }}');
{% endif %}
{% for t in tables %}
{% if t.partitioned %}
-- A new table only: its partition function and scheme, named after schema and table
-- (functions and schemes are database-wide objects, so two schemas never share one), with
-- this batch's boundaries. RANGE LEFT: a boundary value belongs to the partition on its
-- left, so a stream's largest key closes its partition, and the value just below its
-- smallest key closes the empty partition under it. An existing table keeps its function:
-- the pre-flight has checked this batch against it, and the table's commit merges and splits
-- its boundaries (empty partitions only) in the transaction that switches the batch in.
IF OBJECT_ID({{ nstr(qn(schema, t.name)) }}, N'U') IS NULL AND NOT EXISTS (SELECT 1 FROM sys.partition_functions WHERE name = {{ nstr(t.function) }})
    CREATE PARTITION FUNCTION {{ qc(t.function) }} ({{ t.key_type }}) AS RANGE LEFT FOR VALUES ({% for b in t.boundaries %}{{ b.sql }}{{ ", " if not loop.last }}{% endfor %});
-- A scheme names one more filegroup than the function has boundaries: each partition's,
-- in order, then the one above the last boundary. Empty partitions go to {{ edge_filegroup }}:
-- the table keeps an empty partition at both ends, so that later batches split and merge
-- empty partitions only.
IF OBJECT_ID({{ nstr(qn(schema, t.name)) }}, N'U') IS NULL AND NOT EXISTS (SELECT 1 FROM sys.partition_schemes WHERE name = {{ nstr(t.scheme) }})
    CREATE PARTITION SCHEME {{ qc(t.scheme) }} AS PARTITION {{ qc(t.function) }} TO ({% for fg in t.scheme_filegroups %}{{ q(fg) }}{{ ", " if not loop.last }}{% endfor %});
{% endif %}
-- Columns in the file's order, NULL only where the spec declares them nullable: BULK
-- INSERT without a format file maps fields by position, and SWITCH needs staging and target
-- identical column for column (type, nullability, order).
IF OBJECT_ID({{ nstr(qn(schema, t.name)) }}, N'U') IS NULL
    CREATE TABLE {{ qn(schema, t.name) }} (
{% for c in t.columns %}
        {{ q(c.name) }} {{ c.type }} {{ "NULL" if c.nullable else "NOT NULL" }}{{ "," if not loop.last }}
{% endfor %}
    ) ON {% if t.partitioned %}{{ qc(t.scheme) }}({{ q(t.key) }}){% else %}[PRIMARY]{% endif %};
{% if publish_batch and t.next_table %}
-- publish: batch. The table's next version (its validated staging table, renamed) that an
-- earlier run staged and never published: this run stages its own.
DROP TABLE IF EXISTS {{ qn(staging_schema, t.next_table) }};
{% endif %}
{% endfor %}
-- One row per load, like the record runs' work queue, with where on the server it ran
-- (port: the one the client dialled; local_tcp_port: the one the connection landed on).
-- Keyed by the DAG too: a run id is unique only within its DAG. The key can reach 1,260
-- bytes (two nvarchar(250), a sysname, an int): over the 900 bytes of a clustered index
-- key, within the 1,700 of a nonclustered one (2016+), hence a heap with a nonclustered key.
IF OBJECT_ID({{ nstr(qn(control_schema, "load_stats")) }}, N'U') IS NULL
    CREATE TABLE {{ qn(control_schema, "load_stats") }} (
        dag_id        nvarchar(250) NOT NULL,
        run_id        nvarchar(250) NOT NULL,
        batch         nvarchar(250) NOT NULL,
        table_name    nvarchar(128) NOT NULL,
        stream        int NOT NULL,
        [file]        nvarchar(1000) NOT NULL,
        bytes         bigint NULL,
        rows_loaded   bigint NULL,
        started_at    datetime2(3) NULL,
        ended_at      datetime2(3) NULL,
        seconds       float NULL,
        validation    nvarchar(max) NULL,
        session_id    int NULL,
        scheduler_id  int NULL,
        cpu_id        int NULL,
        node_id       int NULL,
        local_tcp_port int NULL,
        reads         bigint NULL,
        writes        bigint NULL,
        cpu_time_ms   bigint NULL,
        mb_per_s      float NULL,
        rows_per_s    float NULL,
        port          int NULL,
        outcome       nvarchar(100) NULL,
        logging       nvarchar(40) NULL,
        log_ratio     float NULL,
        CONSTRAINT [load_stats_pk] PRIMARY KEY NONCLUSTERED (dag_id, run_id, table_name, stream)
    );
-- Each partitioned table's plan for this run (setup writes it, each stream's switch marks
-- its row ready, the table's last switch commits the batch and clears it): the partition
-- each staging table goes to, on which filegroup, with which data compression.
IF OBJECT_ID({{ nstr(qn(control_schema, "planned_partitions")) }}, N'U') IS NULL
    CREATE TABLE {{ qn(control_schema, "planned_partitions") }} (
        target_schema    nvarchar(128) NOT NULL,
        table_name       nvarchar(128) NOT NULL,
        staging_table    nvarchar(128) NOT NULL,
        stream           int NOT NULL,
        batch            nvarchar(250) NOT NULL,
        key_min          nvarchar(64) NOT NULL,
        key_max          nvarchar(64) NOT NULL,
        rows_planned     bigint NULL,
        run              nvarchar(250) NOT NULL,
        stream_filegroup nvarchar(128) NOT NULL,
        [filegroup]      nvarchar(128) NOT NULL,
        [compression]    nvarchar(4000) NOT NULL,
        planned_at       datetime2(3) NOT NULL,
        ready_at         datetime2(3) NULL,
        CONSTRAINT [planned_partitions_pk] PRIMARY KEY (target_schema, table_name, staging_table)
    );
-- The batch each partition of a partitioned table holds (RANGE LEFT: a partition is named by
-- its upper boundary), written in the transaction that switches it in.
IF OBJECT_ID({{ nstr(qn(control_schema, "partition_batches")) }}, N'U') IS NULL
    CREATE TABLE {{ qn(control_schema, "partition_batches") }} (
        target_schema nvarchar(128) NOT NULL,
        table_name    nvarchar(128) NOT NULL,
        key_min       nvarchar(64) NOT NULL,
        key_max       nvarchar(64) NOT NULL,
        batch         nvarchar(250) NOT NULL,
        run           nvarchar(250) NOT NULL,
        rows_planned  bigint NULL,
        switched_at   datetime2(3) NOT NULL,
        CONSTRAINT [partition_batches_pk] PRIMARY KEY (target_schema, table_name, key_max)
    );
{% for column, type in [("dag_id", "nvarchar(250)"), ("mb_per_s", "float"), ("rows_per_s", "float"), ("port", "int"), ("outcome", "nvarchar(100)"), ("logging", "nvarchar(40)"), ("log_ratio", "float")] %}
{% if loop.first %}
-- Tables created by an earlier version lack the later columns. COL_LENGTH is NULL for a
-- column that does not exist; a NULL-able column is added as metadata only, no rewrite.
{% endif %}
IF COL_LENGTH({{ nstr(qn(control_schema, "load_stats")) }}, {{ nstr(column) }}) IS NULL
    ALTER TABLE {{ qn(control_schema, "load_stats") }} ADD {{ q(column) }} {{ type }} NULL;
{% endfor %}
-- ... and are keyed by (run_id, table_name, stream): the rows of two DAGs' runs with the
-- same run id overwrote each other. Re-keyed once, in one transaction (XACT_ABORT rolls it
-- all back on any error), under setup's application lock; rows written before the DAG was
-- recorded keep dag_id N''. ALTER COLUMN keeps dag_id's type and length and changes only
-- its nullability, which a column in no index (nor in CREATE STATISTICS) allows.
-- Its own batch, after the ADDs: a batch that names a column compiles only once it exists.
IF EXISTS (SELECT 1 FROM sys.key_constraints AS k
           WHERE k.parent_object_id = OBJECT_ID({{ nstr(qn(control_schema, "load_stats")) }}) AND k.[type] = 'PK'
             AND NOT EXISTS (SELECT 1 FROM sys.index_columns AS ic
                             WHERE ic.[object_id] = k.parent_object_id AND ic.index_id = k.unique_index_id
                               AND COL_NAME(ic.[object_id], ic.column_id) = N'dag_id'))
BEGIN
    SET XACT_ABORT ON
    BEGIN TRY
        BEGIN TRANSACTION
        UPDATE {{ qn(control_schema, "load_stats") }} SET dag_id = N'' WHERE dag_id IS NULL
        ALTER TABLE {{ qn(control_schema, "load_stats") }} ALTER COLUMN dag_id nvarchar(250) NOT NULL
        ALTER TABLE {{ qn(control_schema, "load_stats") }} DROP CONSTRAINT [load_stats_pk]
        ALTER TABLE {{ qn(control_schema, "load_stats") }}
            ADD CONSTRAINT [load_stats_pk] PRIMARY KEY NONCLUSTERED (dag_id, run_id, table_name, stream)
        COMMIT TRANSACTION
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
        ;THROW
    END CATCH
END;

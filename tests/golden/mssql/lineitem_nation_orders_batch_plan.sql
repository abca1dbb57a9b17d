-- Switchyard load plan: spec tpch, 4 streams, target mssql, load mode bulk_insert
-- database switchyard, schema tpch; stream k connects to port 2000 + (k - 1) mod 4
USE [switchyard];
GO

-- objects
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
GO
-- One filegroup per stream: a staging table and its partition must share a filegroup for
-- SWITCH, and separate filegroups spread allocation (PFS/GAM) contention over their files.
-- Files are created at the size this batch needs (the stream files' bytes times the
-- headroom 1.2, plus what a file already holds), so no load waits for a file to
-- grow; FILEGROWTH is only the safety net. Creating or growing a data file writes no
-- zeros when the service account holds "Perform volume maintenance tasks" (instant file
-- initialization, sys.dm_server_services.instant_file_initialization_enabled).
-- fg1: 1 file(s) for 50.0 KB of stream files (lineitem_1, orders_1).
IF NOT EXISTS (SELECT 1 FROM sys.filegroups WHERE name = N'fg1')
    ALTER DATABASE CURRENT ADD FILEGROUP [fg1];
GO
-- A filegroup holds tables only once it has a file. ALTER DATABASE CURRENT (2012+) keeps
-- the database name out of the script.
IF NOT EXISTS (SELECT 1 FROM sys.database_files WHERE name = N'fg1_1')
    ALTER DATABASE CURRENT ADD FILE (NAME = N'fg1_1', FILENAME = N'/var/opt/mssql/data/switchyard_fg1_1.ndf', SIZE = 64MB, MAXSIZE = UNLIMITED, FILEGROWTH = 64MB) TO FILEGROUP [fg1];
GO
-- A file made by an earlier batch grows to this batch's size before any load; only ever
-- up (MODIFY FILE refuses a size at or below the current one, error 5039), and
-- sys.database_files.size counts 8-KB pages.
IF (SELECT size FROM sys.database_files WHERE name = N'fg1_1') < 8192
    ALTER DATABASE CURRENT MODIFY FILE (NAME = N'fg1_1', SIZE = 64MB);
GO
-- fg2: 1 file(s) for 50.0 KB of stream files (lineitem_2, orders_2).
IF NOT EXISTS (SELECT 1 FROM sys.filegroups WHERE name = N'fg2')
    ALTER DATABASE CURRENT ADD FILEGROUP [fg2];
GO
IF NOT EXISTS (SELECT 1 FROM sys.database_files WHERE name = N'fg2_1')
    ALTER DATABASE CURRENT ADD FILE (NAME = N'fg2_1', FILENAME = N'/var/opt/mssql/data/switchyard_fg2_1.ndf', SIZE = 64MB, MAXSIZE = UNLIMITED, FILEGROWTH = 64MB) TO FILEGROUP [fg2];
GO
IF (SELECT size FROM sys.database_files WHERE name = N'fg2_1') < 8192
    ALTER DATABASE CURRENT MODIFY FILE (NAME = N'fg2_1', SIZE = 64MB);
GO
-- fg3: 1 file(s) for 10.0 KB of stream files (orders_3).
IF NOT EXISTS (SELECT 1 FROM sys.filegroups WHERE name = N'fg3')
    ALTER DATABASE CURRENT ADD FILEGROUP [fg3];
GO
IF NOT EXISTS (SELECT 1 FROM sys.database_files WHERE name = N'fg3_1')
    ALTER DATABASE CURRENT ADD FILE (NAME = N'fg3_1', FILENAME = N'/var/opt/mssql/data/switchyard_fg3_1.ndf', SIZE = 64MB, MAXSIZE = UNLIMITED, FILEGROWTH = 64MB) TO FILEGROUP [fg3];
GO
IF (SELECT size FROM sys.database_files WHERE name = N'fg3_1') < 8192
    ALTER DATABASE CURRENT MODIFY FILE (NAME = N'fg3_1', SIZE = 64MB);
GO
-- fg4: 1 file(s) for 10.0 KB of stream files (orders_4).
IF NOT EXISTS (SELECT 1 FROM sys.filegroups WHERE name = N'fg4')
    ALTER DATABASE CURRENT ADD FILEGROUP [fg4];
GO
IF NOT EXISTS (SELECT 1 FROM sys.database_files WHERE name = N'fg4_1')
    ALTER DATABASE CURRENT ADD FILE (NAME = N'fg4_1', FILENAME = N'/var/opt/mssql/data/switchyard_fg4_1.ndf', SIZE = 64MB, MAXSIZE = UNLIMITED, FILEGROWTH = 64MB) TO FILEGROUP [fg4];
GO
IF (SELECT size FROM sys.database_files WHERE name = N'fg4_1') < 8192
    ALTER DATABASE CURRENT MODIFY FILE (NAME = N'fg4_1', SIZE = 64MB);
GO
-- fg_edge: the empty partitions below the first stream and above the last (and in
-- gaps between streams), on a small filegroup of their own rather than on PRIMARY.
IF NOT EXISTS (SELECT 1 FROM sys.filegroups WHERE name = N'fg_edge')
    ALTER DATABASE CURRENT ADD FILEGROUP [fg_edge];
GO
IF NOT EXISTS (SELECT 1 FROM sys.database_files WHERE name = N'fg_edge_1')
    ALTER DATABASE CURRENT ADD FILE (NAME = N'fg_edge_1', FILENAME = N'/var/opt/mssql/data/switchyard_fg_edge_1.ndf', SIZE = 8MB, MAXSIZE = UNLIMITED, FILEGROWTH = 64MB) TO FILEGROUP [fg_edge];
GO
IF (SELECT size FROM sys.database_files WHERE name = N'fg_edge_1') < 1024
    ALTER DATABASE CURRENT MODIFY FILE (NAME = N'fg_edge_1', SIZE = 8MB);
GO
-- CREATE SCHEMA must be alone in its batch, hence EXEC of a constant string.
IF SCHEMA_ID(N'tpch') IS NULL EXEC (N'CREATE SCHEMA [tpch]');
GO
IF SCHEMA_ID(N'tpch_staging') IS NULL EXEC (N'CREATE SCHEMA [tpch_staging]');
GO
-- The run lease: one run at a time loads a target schema (see
-- docs/reliability-and-security.md); a row per target schema names the run that holds it.
-- Created before the lease is first taken, under the setup applock. CREATE SCHEMA must be
-- alone in its batch, hence EXEC of a constant string.
IF SCHEMA_ID(N'switchyard') IS NULL EXEC (N'CREATE SCHEMA [switchyard]');
GO
IF OBJECT_ID(N'[switchyard].[run_lease]', N'U') IS NULL
    CREATE TABLE [switchyard].[run_lease] (
        [target_schema] nvarchar(128) NOT NULL CONSTRAINT [run_lease_pk] PRIMARY KEY,
        [holder]        nvarchar(520) NOT NULL,
        [batch]         nvarchar(1000) NOT NULL,
        [acquired_at]   datetime2(3) NOT NULL,
        [expires_at]    datetime2(3) NOT NULL
    );
GO
-- A new table only: its partition function and scheme, named after schema and table
-- (functions and schemes are database-wide objects, so two schemas never share one), with
-- this batch's boundaries. RANGE LEFT: a boundary value belongs to the partition on its
-- left, so a stream's largest key closes its partition, and the value just below its
-- smallest key closes the empty partition under it. An existing table keeps its function:
-- the pre-flight has checked this batch against it, and the table's commit merges and splits
-- its boundaries (empty partitions only) in the transaction that switches the batch in.
IF OBJECT_ID(N'[tpch].[lineitem]', N'U') IS NULL AND NOT EXISTS (SELECT 1 FROM sys.partition_functions WHERE name = N'pf_tpch_lineitem')
    CREATE PARTITION FUNCTION [pf_tpch_lineitem] (bigint) AS RANGE LEFT FOR VALUES (8000, 9000, 10000);
GO
-- A scheme names one more filegroup than the function has boundaries: each partition's,
-- in order, then the one above the last boundary. Empty partitions go to fg_edge:
-- the table keeps an empty partition at both ends, so that later batches split and merge
-- empty partitions only.
IF OBJECT_ID(N'[tpch].[lineitem]', N'U') IS NULL AND NOT EXISTS (SELECT 1 FROM sys.partition_schemes WHERE name = N'ps_tpch_lineitem')
    CREATE PARTITION SCHEME [ps_tpch_lineitem] AS PARTITION [pf_tpch_lineitem] TO ([fg_edge], [fg1], [fg2], [fg_edge]);
GO
-- Columns in the file's order, NULL only where the spec declares them nullable: BULK
-- INSERT without a format file maps fields by position, and SWITCH needs staging and target
-- identical column for column (type, nullability, order).
IF OBJECT_ID(N'[tpch].[lineitem]', N'U') IS NULL
    CREATE TABLE [tpch].[lineitem] (
        [l_orderkey] bigint NOT NULL,
        [l_partkey] bigint NOT NULL,
        [l_suppkey] bigint NOT NULL,
        [l_linenumber] integer NOT NULL,
        [l_quantity] money NOT NULL,
        [l_extendedprice] money NOT NULL,
        [l_discount] money NOT NULL,
        [l_tax] money NOT NULL,
        [l_returnflag] char(1) NOT NULL,
        [l_linestatus] char(1) NOT NULL,
        [l_shipdate] date NOT NULL,
        [l_commitdate] date NOT NULL,
        [l_receiptdate] date NOT NULL,
        [l_shipinstruct] char(25) NOT NULL,
        [l_shipmode] char(10) NOT NULL,
        [l_comment] varchar(44) NOT NULL
    ) ON [ps_tpch_lineitem]([l_orderkey]);
GO
-- Columns in the file's order, NULL only where the spec declares them nullable: BULK
-- INSERT without a format file maps fields by position, and SWITCH needs staging and target
-- identical column for column (type, nullability, order).
IF OBJECT_ID(N'[tpch].[nation]', N'U') IS NULL
    CREATE TABLE [tpch].[nation] (
        [n_nationkey] integer NOT NULL,
        [n_name] char(25) NOT NULL,
        [n_regionkey] integer NOT NULL,
        [n_comment] varchar(152) NOT NULL
    ) ON [PRIMARY];
GO
-- publish: batch. The table's next version (its validated staging table, renamed) that an
-- earlier run staged and never published: this run stages its own.
DROP TABLE IF EXISTS [tpch_staging].[nation__next];
GO
-- A new table only: its partition function and scheme, named after schema and table
-- (functions and schemes are database-wide objects, so two schemas never share one), with
-- this batch's boundaries. RANGE LEFT: a boundary value belongs to the partition on its
-- left, so a stream's largest key closes its partition, and the value just below its
-- smallest key closes the empty partition under it. An existing table keeps its function:
-- the pre-flight has checked this batch against it, and the table's commit merges and splits
-- its boundaries (empty partitions only) in the transaction that switches the batch in.
IF OBJECT_ID(N'[tpch].[orders]', N'U') IS NULL AND NOT EXISTS (SELECT 1 FROM sys.partition_functions WHERE name = N'pf_tpch_orders')
    CREATE PARTITION FUNCTION [pf_tpch_orders] (bigint) AS RANGE LEFT FOR VALUES (0, 2000, 4000, 6000, 8000);
GO
-- A scheme names one more filegroup than the function has boundaries: each partition's,
-- in order, then the one above the last boundary. Empty partitions go to fg_edge:
-- the table keeps an empty partition at both ends, so that later batches split and merge
-- empty partitions only.
IF OBJECT_ID(N'[tpch].[orders]', N'U') IS NULL AND NOT EXISTS (SELECT 1 FROM sys.partition_schemes WHERE name = N'ps_tpch_orders')
    CREATE PARTITION SCHEME [ps_tpch_orders] AS PARTITION [pf_tpch_orders] TO ([fg_edge], [fg1], [fg2], [fg3], [fg4], [fg_edge]);
GO
-- Columns in the file's order, NULL only where the spec declares them nullable: BULK
-- INSERT without a format file maps fields by position, and SWITCH needs staging and target
-- identical column for column (type, nullability, order).
IF OBJECT_ID(N'[tpch].[orders]', N'U') IS NULL
    CREATE TABLE [tpch].[orders] (
        [o_orderkey] bigint NOT NULL,
        [o_custkey] bigint NOT NULL,
        [o_orderstatus] char(1) NOT NULL,
        [o_totalprice] money NOT NULL,
        [o_orderdate] date NOT NULL,
        [o_orderpriority] char(15) NOT NULL,
        [o_clerk] char(15) NOT NULL,
        [o_shippriority] integer NOT NULL,
        [o_comment] varchar(79) NOT NULL
    ) ON [ps_tpch_orders]([o_orderkey]);
GO
-- One row per load, like the record runs' work queue, with where on the server it ran
-- (port: the one the client dialled; local_tcp_port: the one the connection landed on).
-- Keyed by the DAG too: a run id is unique only within its DAG. The key can reach 1,260
-- bytes (two nvarchar(250), a sysname, an int): over the 900 bytes of a clustered index
-- key, within the 1,700 of a nonclustered one (2016+), hence a heap with a nonclustered key.
IF OBJECT_ID(N'[switchyard].[load_stats]', N'U') IS NULL
    CREATE TABLE [switchyard].[load_stats] (
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
GO
-- Each partitioned table's plan for this run (setup writes it, each stream's switch marks
-- its row ready, the table's last switch commits the batch and clears it): the partition
-- each staging table goes to, on which filegroup, with which data compression.
IF OBJECT_ID(N'[switchyard].[planned_partitions]', N'U') IS NULL
    CREATE TABLE [switchyard].[planned_partitions] (
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
GO
-- The batch each partition of a partitioned table holds (RANGE LEFT: a partition is named by
-- its upper boundary), written in the transaction that switches it in.
IF OBJECT_ID(N'[switchyard].[partition_batches]', N'U') IS NULL
    CREATE TABLE [switchyard].[partition_batches] (
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
GO
-- Tables created by an earlier version lack the later columns. COL_LENGTH is NULL for a
-- column that does not exist; a NULL-able column is added as metadata only, no rewrite.
IF COL_LENGTH(N'[switchyard].[load_stats]', N'dag_id') IS NULL
    ALTER TABLE [switchyard].[load_stats] ADD [dag_id] nvarchar(250) NULL;
GO
IF COL_LENGTH(N'[switchyard].[load_stats]', N'mb_per_s') IS NULL
    ALTER TABLE [switchyard].[load_stats] ADD [mb_per_s] float NULL;
GO
IF COL_LENGTH(N'[switchyard].[load_stats]', N'rows_per_s') IS NULL
    ALTER TABLE [switchyard].[load_stats] ADD [rows_per_s] float NULL;
GO
IF COL_LENGTH(N'[switchyard].[load_stats]', N'port') IS NULL
    ALTER TABLE [switchyard].[load_stats] ADD [port] int NULL;
GO
IF COL_LENGTH(N'[switchyard].[load_stats]', N'outcome') IS NULL
    ALTER TABLE [switchyard].[load_stats] ADD [outcome] nvarchar(100) NULL;
GO
IF COL_LENGTH(N'[switchyard].[load_stats]', N'logging') IS NULL
    ALTER TABLE [switchyard].[load_stats] ADD [logging] nvarchar(40) NULL;
GO
IF COL_LENGTH(N'[switchyard].[load_stats]', N'log_ratio') IS NULL
    ALTER TABLE [switchyard].[load_stats] ADD [log_ratio] float NULL;
GO
-- ... and are keyed by (run_id, table_name, stream): the rows of two DAGs' runs with the
-- same run id overwrote each other. Re-keyed once, in one transaction (XACT_ABORT rolls it
-- all back on any error), under setup's application lock; rows written before the DAG was
-- recorded keep dag_id N''. ALTER COLUMN keeps dag_id's type and length and changes only
-- its nullability, which a column in no index (nor in CREATE STATISTICS) allows.
-- Its own batch, after the ADDs: a batch that names a column compiles only once it exists.
IF EXISTS (SELECT 1 FROM sys.key_constraints AS k
           WHERE k.parent_object_id = OBJECT_ID(N'[switchyard].[load_stats]') AND k.[type] = 'PK'
             AND NOT EXISTS (SELECT 1 FROM sys.index_columns AS ic
                             WHERE ic.[object_id] = k.parent_object_id AND ic.index_id = k.unique_index_id
                               AND COL_NAME(ic.[object_id], ic.column_id) = N'dag_id'))
BEGIN
    SET XACT_ABORT ON
    BEGIN TRY
        BEGIN TRANSACTION
        UPDATE [switchyard].[load_stats] SET dag_id = N'' WHERE dag_id IS NULL
        ALTER TABLE [switchyard].[load_stats] ALTER COLUMN dag_id nvarchar(250) NOT NULL
        ALTER TABLE [switchyard].[load_stats] DROP CONSTRAINT [load_stats_pk]
        ALTER TABLE [switchyard].[load_stats]
            ADD CONSTRAINT [load_stats_pk] PRIMARY KEY NONCLUSTERED (dag_id, run_id, table_name, stream)
        COMMIT TRANSACTION
    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
        ;THROW
    END CATCH
END;
GO

-- lineitem_1: lineitem/lineitem.1.tbl, keys 8001..9000, filegroup fg1, port 2000
-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS [tpch_staging].[lineitem_1];
GO
-- A heap with no index, on its partition's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged; the target's indexes are built on it after validation, before
-- the switch.
-- The target's columns as the catalog has them (names, types, lengths, collation,
-- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
-- compression: SWITCH needs both equal to the partition's.
CREATE TABLE [tpch_staging].[lineitem_1] (
    [l_orderkey] bigint NOT NULL,
    [l_partkey] bigint NOT NULL,
    [l_suppkey] bigint NOT NULL,
    [l_linenumber] integer NOT NULL,
    [l_quantity] money NOT NULL,
    [l_extendedprice] money NOT NULL,
    [l_discount] money NOT NULL,
    [l_tax] money NOT NULL,
    [l_returnflag] char(1) NOT NULL,
    [l_linestatus] char(1) NOT NULL,
    [l_shipdate] date NOT NULL,
    [l_commitdate] date NOT NULL,
    [l_receiptdate] date NOT NULL,
    [l_shipinstruct] char(25) NOT NULL,
    [l_shipmode] char(10) NOT NULL,
    [l_comment] varchar(44) NOT NULL
) ON [fg1];
GO
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one. IS NOT NULL: with it SWITCH can
-- prove every row belongs to a partition other than the first even when the target's key
-- column allows NULL (NULL sorts into the first partition; Msg 4982 otherwise).
ALTER TABLE [tpch_staging].[lineitem_1] WITH CHECK
    ADD CONSTRAINT [lineitem_1_range] CHECK ([l_orderkey] IS NOT NULL AND [l_orderkey] >= 8001 AND [l_orderkey] <= 9000);
GO
-- One load per scheduler, as the 2010 record run did it: the request runs on one scheduler
-- for its whole batch, so the claim and the BULK INSERT below are on the same one. The
-- session-owned applock names the scheduler; a second load there fails at once (error
-- 51001) and the loader reconnects to land elsewhere. The scheduler is kept in the
-- session context for the statistics read after the load.
DECLARE @scheduler int = (SELECT scheduler_id FROM sys.dm_exec_requests WHERE session_id = @@SPID)
DECLARE @resource nvarchar(255) = CONCAT(N'switchyard.scheduler.', @scheduler)
DECLARE @rc int
EXEC @rc = sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0
IF @rc < 0
    THROW 51001, N'switchyard: another load holds this scheduler', 1
EXEC sp_set_session_context N'switchyard.scheduler', @scheduler
-- A retried load starts from an empty table: BULK INSERT and bulk copy commit every BATCHSIZE
-- rows, so a failed attempt leaves its first batches behind, and the retry reruns this step
-- alone (not prepare). TRUNCATE TABLE deallocates the pages (minimally logged, so the load
-- that follows still fills an empty heap) and keeps the range CHECK constraint trusted.
TRUNCATE TABLE [tpch_staging].[lineitem_1]
-- DATAFILETYPE 'char': every field is taken as it is between its terminators (a backslash
-- is an ordinary byte).
-- CODEPAGE 65001: the file's UTF-8 text is converted to each column's code page; exact
-- in nchar/nvarchar and _UTF8-collated columns (a character outside a single-byte
-- column's code page cannot be stored exactly by any load). SQL Server on Linux takes
-- CODEPAGE RAW only (2019+, none before): the loader uses that there.
-- KEEPNULLS: BULK INSERT reads an empty field as NULL, and without KEEPNULLS a column's
-- default replaces it
-- (https://learn.microsoft.com/en-us/sql/relational-databases/import-export/keep-nulls-or-use-default-values-during-bulk-import-sql-server):
-- with it an empty field is NULL, never a column default. NULL is what a nullable column's empty
-- field means here (the spec's NULL marker is the empty field); in a NOT NULL column, where
-- the spec means an empty string, the server refuses the NULL (error 515) and the loader
-- loads the file over the client path instead, which stores ''.
-- TABLOCK into an empty heap: minimally logged under SIMPLE or BULK_LOGGED recovery.
-- CHECK_CONSTRAINTS keeps the range constraint trusted for SWITCH (without it the load
-- marks the constraint untrusted). MAXERRORS = 0: no bad line is skipped. Dates as
-- yyyy-mm-dd, read the same under every DATEFORMAT for date and datetime2; SET DATEFORMAT
-- ymd makes it so for datetime and smalldatetime too.
SET DATEFORMAT ymd
-- The row terminator '|' + LF holds a control character: BULK INSERT takes only
-- literals, so it is built with NCHAR() and the statement run by sp_executesql, as the BULK
-- INSERT documentation builds an LF terminator ('\n' would mean CR LF to SQL Server, and no
-- line break is written inside a string literal here). The variable goes inside a literal of
-- that statement, so its quotes are doubled there (a `'` delimiter folded into the terminator).
DECLARE @rowterminator nvarchar(12) = N'|' + NCHAR(10)
DECLARE @load nvarchar(max) = N'BULK INSERT [tpch_staging].[lineitem_1] FROM ''/var/opt/mssql/switchyard/batch/lineitem/lineitem.1.tbl'' WITH (DATAFILETYPE = ''char'', FIELDTERMINATOR = ''|'', ROWTERMINATOR = ''' + REPLACE(@rowterminator, N'''', N'''''') + N''', CODEPAGE = ''65001'', KEEPNULLS, TABLOCK, CHECK_CONSTRAINTS, BATCHSIZE = 100000, MAXERRORS = 0)'
EXEC sys.sp_executesql @load;
GO
-- SWITCH refuses an untrusted CHECK constraint. The load checked every row, so this finds
-- the constraint trusted and costs nothing; after a load that bypassed the check (another
-- tool, a TDS copy without check_constraints) it re-validates once, with one scan.
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID(N'[tpch_staging].[lineitem_1]') AND name = N'lineitem_1_range' AND is_not_trusted = 1)
    ALTER TABLE [tpch_staging].[lineitem_1] WITH CHECK CHECK CONSTRAINT [lineitem_1_range];
GO
-- switch: the target's indexes built on tpch_staging.lineitem_1 (none on a table setup made from the spec), then the stream is marked ready; the batch's publish moves it in with every table of the batch

-- lineitem_2: lineitem/lineitem.2.tbl, keys 9001..10000, filegroup fg2, port 2001
-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS [tpch_staging].[lineitem_2];
GO
-- A heap with no index, on its partition's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged; the target's indexes are built on it after validation, before
-- the switch.
-- The target's columns as the catalog has them (names, types, lengths, collation,
-- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
-- compression: SWITCH needs both equal to the partition's.
CREATE TABLE [tpch_staging].[lineitem_2] (
    [l_orderkey] bigint NOT NULL,
    [l_partkey] bigint NOT NULL,
    [l_suppkey] bigint NOT NULL,
    [l_linenumber] integer NOT NULL,
    [l_quantity] money NOT NULL,
    [l_extendedprice] money NOT NULL,
    [l_discount] money NOT NULL,
    [l_tax] money NOT NULL,
    [l_returnflag] char(1) NOT NULL,
    [l_linestatus] char(1) NOT NULL,
    [l_shipdate] date NOT NULL,
    [l_commitdate] date NOT NULL,
    [l_receiptdate] date NOT NULL,
    [l_shipinstruct] char(25) NOT NULL,
    [l_shipmode] char(10) NOT NULL,
    [l_comment] varchar(44) NOT NULL
) ON [fg2];
GO
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one. IS NOT NULL: with it SWITCH can
-- prove every row belongs to a partition other than the first even when the target's key
-- column allows NULL (NULL sorts into the first partition; Msg 4982 otherwise).
ALTER TABLE [tpch_staging].[lineitem_2] WITH CHECK
    ADD CONSTRAINT [lineitem_2_range] CHECK ([l_orderkey] IS NOT NULL AND [l_orderkey] >= 9001 AND [l_orderkey] <= 10000);
GO
-- One load per scheduler, as the 2010 record run did it: the request runs on one scheduler
-- for its whole batch, so the claim and the BULK INSERT below are on the same one. The
-- session-owned applock names the scheduler; a second load there fails at once (error
-- 51001) and the loader reconnects to land elsewhere. The scheduler is kept in the
-- session context for the statistics read after the load.
DECLARE @scheduler int = (SELECT scheduler_id FROM sys.dm_exec_requests WHERE session_id = @@SPID)
DECLARE @resource nvarchar(255) = CONCAT(N'switchyard.scheduler.', @scheduler)
DECLARE @rc int
EXEC @rc = sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0
IF @rc < 0
    THROW 51001, N'switchyard: another load holds this scheduler', 1
EXEC sp_set_session_context N'switchyard.scheduler', @scheduler
-- A retried load starts from an empty table: BULK INSERT and bulk copy commit every BATCHSIZE
-- rows, so a failed attempt leaves its first batches behind, and the retry reruns this step
-- alone (not prepare). TRUNCATE TABLE deallocates the pages (minimally logged, so the load
-- that follows still fills an empty heap) and keeps the range CHECK constraint trusted.
TRUNCATE TABLE [tpch_staging].[lineitem_2]
-- DATAFILETYPE 'char': every field is taken as it is between its terminators (a backslash
-- is an ordinary byte).
-- CODEPAGE 65001: the file's UTF-8 text is converted to each column's code page; exact
-- in nchar/nvarchar and _UTF8-collated columns (a character outside a single-byte
-- column's code page cannot be stored exactly by any load). SQL Server on Linux takes
-- CODEPAGE RAW only (2019+, none before): the loader uses that there.
-- KEEPNULLS: BULK INSERT reads an empty field as NULL, and without KEEPNULLS a column's
-- default replaces it
-- (https://learn.microsoft.com/en-us/sql/relational-databases/import-export/keep-nulls-or-use-default-values-during-bulk-import-sql-server):
-- with it an empty field is NULL, never a column default. NULL is what a nullable column's empty
-- field means here (the spec's NULL marker is the empty field); in a NOT NULL column, where
-- the spec means an empty string, the server refuses the NULL (error 515) and the loader
-- loads the file over the client path instead, which stores ''.
-- TABLOCK into an empty heap: minimally logged under SIMPLE or BULK_LOGGED recovery.
-- CHECK_CONSTRAINTS keeps the range constraint trusted for SWITCH (without it the load
-- marks the constraint untrusted). MAXERRORS = 0: no bad line is skipped. Dates as
-- yyyy-mm-dd, read the same under every DATEFORMAT for date and datetime2; SET DATEFORMAT
-- ymd makes it so for datetime and smalldatetime too.
SET DATEFORMAT ymd
-- The row terminator '|' + LF holds a control character: BULK INSERT takes only
-- literals, so it is built with NCHAR() and the statement run by sp_executesql, as the BULK
-- INSERT documentation builds an LF terminator ('\n' would mean CR LF to SQL Server, and no
-- line break is written inside a string literal here). The variable goes inside a literal of
-- that statement, so its quotes are doubled there (a `'` delimiter folded into the terminator).
DECLARE @rowterminator nvarchar(12) = N'|' + NCHAR(10)
DECLARE @load nvarchar(max) = N'BULK INSERT [tpch_staging].[lineitem_2] FROM ''/var/opt/mssql/switchyard/batch/lineitem/lineitem.2.tbl'' WITH (DATAFILETYPE = ''char'', FIELDTERMINATOR = ''|'', ROWTERMINATOR = ''' + REPLACE(@rowterminator, N'''', N'''''') + N''', CODEPAGE = ''65001'', KEEPNULLS, TABLOCK, CHECK_CONSTRAINTS, BATCHSIZE = 100000, MAXERRORS = 0)'
EXEC sys.sp_executesql @load;
GO
-- SWITCH refuses an untrusted CHECK constraint. The load checked every row, so this finds
-- the constraint trusted and costs nothing; after a load that bypassed the check (another
-- tool, a TDS copy without check_constraints) it re-validates once, with one scan.
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID(N'[tpch_staging].[lineitem_2]') AND name = N'lineitem_2_range' AND is_not_trusted = 1)
    ALTER TABLE [tpch_staging].[lineitem_2] WITH CHECK CHECK CONSTRAINT [lineitem_2_range];
GO
-- switch: the target's indexes built on tpch_staging.lineitem_2 (none on a table setup made from the spec), then the stream is marked ready; the batch's publish moves it in with every table of the batch

-- nation_1: nation/nation.1.tbl, loaded whole, on PRIMARY, port 2000
-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS [tpch_staging].[nation_1];
GO
-- publish: batch. The table's next version an earlier attempt of this group staged (its staging
-- table, renamed by sp_rename, which renames the table and not its constraints) is dropped too:
-- its constraints carry the names this staging table's get, and a constraint's name is unique
-- in its schema (https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sp-rename-transact-sql).
DROP TABLE IF EXISTS [tpch_staging].[nation__next];
GO
-- A heap with no index, on its partition's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged; the target's indexes are built on it after validation, before
-- the switch.
-- The target's columns as the catalog has them (names, types, lengths, collation,
-- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
-- compression: SWITCH needs both equal to the partition's.
CREATE TABLE [tpch_staging].[nation_1] (
    [n_nationkey] integer NOT NULL,
    [n_name] char(25) NOT NULL,
    [n_regionkey] integer NOT NULL,
    [n_comment] varchar(152) NOT NULL
) ON [PRIMARY];
GO
-- One load per scheduler, as the 2010 record run did it: the request runs on one scheduler
-- for its whole batch, so the claim and the BULK INSERT below are on the same one. The
-- session-owned applock names the scheduler; a second load there fails at once (error
-- 51001) and the loader reconnects to land elsewhere. The scheduler is kept in the
-- session context for the statistics read after the load.
DECLARE @scheduler int = (SELECT scheduler_id FROM sys.dm_exec_requests WHERE session_id = @@SPID)
DECLARE @resource nvarchar(255) = CONCAT(N'switchyard.scheduler.', @scheduler)
DECLARE @rc int
EXEC @rc = sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0
IF @rc < 0
    THROW 51001, N'switchyard: another load holds this scheduler', 1
EXEC sp_set_session_context N'switchyard.scheduler', @scheduler
-- A retried load starts from an empty table: BULK INSERT and bulk copy commit every BATCHSIZE
-- rows, so a failed attempt leaves its first batches behind, and the retry reruns this step
-- alone (not prepare). TRUNCATE TABLE deallocates the pages (minimally logged, so the load
-- that follows still fills an empty heap) and keeps the range CHECK constraint trusted.
TRUNCATE TABLE [tpch_staging].[nation_1]
-- DATAFILETYPE 'char': every field is taken as it is between its terminators (a backslash
-- is an ordinary byte).
-- CODEPAGE 65001: the file's UTF-8 text is converted to each column's code page; exact
-- in nchar/nvarchar and _UTF8-collated columns (a character outside a single-byte
-- column's code page cannot be stored exactly by any load). SQL Server on Linux takes
-- CODEPAGE RAW only (2019+, none before): the loader uses that there.
-- KEEPNULLS: BULK INSERT reads an empty field as NULL, and without KEEPNULLS a column's
-- default replaces it
-- (https://learn.microsoft.com/en-us/sql/relational-databases/import-export/keep-nulls-or-use-default-values-during-bulk-import-sql-server):
-- with it an empty field is NULL, never a column default. NULL is what a nullable column's empty
-- field means here (the spec's NULL marker is the empty field); in a NOT NULL column, where
-- the spec means an empty string, the server refuses the NULL (error 515) and the loader
-- loads the file over the client path instead, which stores ''.
-- TABLOCK into an empty heap: minimally logged under SIMPLE or BULK_LOGGED recovery.
-- CHECK_CONSTRAINTS keeps the range constraint trusted for SWITCH (without it the load
-- marks the constraint untrusted). MAXERRORS = 0: no bad line is skipped. Dates as
-- yyyy-mm-dd, read the same under every DATEFORMAT for date and datetime2; SET DATEFORMAT
-- ymd makes it so for datetime and smalldatetime too.
SET DATEFORMAT ymd
-- The row terminator '|' + LF holds a control character: BULK INSERT takes only
-- literals, so it is built with NCHAR() and the statement run by sp_executesql, as the BULK
-- INSERT documentation builds an LF terminator ('\n' would mean CR LF to SQL Server, and no
-- line break is written inside a string literal here). The variable goes inside a literal of
-- that statement, so its quotes are doubled there (a `'` delimiter folded into the terminator).
DECLARE @rowterminator nvarchar(12) = N'|' + NCHAR(10)
DECLARE @load nvarchar(max) = N'BULK INSERT [tpch_staging].[nation_1] FROM ''/var/opt/mssql/switchyard/batch/nation/nation.1.tbl'' WITH (DATAFILETYPE = ''char'', FIELDTERMINATOR = ''|'', ROWTERMINATOR = ''' + REPLACE(@rowterminator, N'''', N'''''') + N''', CODEPAGE = ''65001'', KEEPNULLS, TABLOCK, CHECK_CONSTRAINTS, BATCHSIZE = 100000, MAXERRORS = 0)'
EXEC sys.sp_executesql @load;
GO
-- publish: batch. The validated staging table of an unpartitioned table becomes the table's
-- next version, [tpch_staging].[nation__next]: the batch's publish (publish_batch.sql)
-- replaces the table's rows with it, together with every other table of the batch, in one
-- transaction. Nothing here touches [tpch].[nation]: its readers never wait for this
-- step. A next version an earlier run left behind is replaced. One transaction (XACT_ABORT: any
-- error rolls all of it back), so a retry finds either the staging table or the next version,
-- never neither.
SET XACT_ABORT ON
BEGIN TRY
    BEGIN TRANSACTION
    DROP TABLE IF EXISTS [tpch_staging].[nation__next]
    -- sp_rename changes the name only: the table stays in its schema with its rows, and the new
    -- name is one part (https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sp-rename-transact-sql).
    -- It runs inside the transaction and is rolled back with it.
    EXEC sys.sp_rename @objname = N'[tpch_staging].[nation_1]', @newname = N'nation__next', @objtype = N'OBJECT'
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;
GO

-- orders_1: orders/orders.1.tbl, keys 1..2000, filegroup fg1, port 2000
-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS [tpch_staging].[orders_1];
GO
-- A heap with no index, on its partition's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged; the target's indexes are built on it after validation, before
-- the switch.
-- The target's columns as the catalog has them (names, types, lengths, collation,
-- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
-- compression: SWITCH needs both equal to the partition's.
CREATE TABLE [tpch_staging].[orders_1] (
    [o_orderkey] bigint NOT NULL,
    [o_custkey] bigint NOT NULL,
    [o_orderstatus] char(1) NOT NULL,
    [o_totalprice] money NOT NULL,
    [o_orderdate] date NOT NULL,
    [o_orderpriority] char(15) NOT NULL,
    [o_clerk] char(15) NOT NULL,
    [o_shippriority] integer NOT NULL,
    [o_comment] varchar(79) NOT NULL
) ON [fg1];
GO
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one. IS NOT NULL: with it SWITCH can
-- prove every row belongs to a partition other than the first even when the target's key
-- column allows NULL (NULL sorts into the first partition; Msg 4982 otherwise).
ALTER TABLE [tpch_staging].[orders_1] WITH CHECK
    ADD CONSTRAINT [orders_1_range] CHECK ([o_orderkey] IS NOT NULL AND [o_orderkey] >= 1 AND [o_orderkey] <= 2000);
GO
-- One load per scheduler, as the 2010 record run did it: the request runs on one scheduler
-- for its whole batch, so the claim and the BULK INSERT below are on the same one. The
-- session-owned applock names the scheduler; a second load there fails at once (error
-- 51001) and the loader reconnects to land elsewhere. The scheduler is kept in the
-- session context for the statistics read after the load.
DECLARE @scheduler int = (SELECT scheduler_id FROM sys.dm_exec_requests WHERE session_id = @@SPID)
DECLARE @resource nvarchar(255) = CONCAT(N'switchyard.scheduler.', @scheduler)
DECLARE @rc int
EXEC @rc = sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0
IF @rc < 0
    THROW 51001, N'switchyard: another load holds this scheduler', 1
EXEC sp_set_session_context N'switchyard.scheduler', @scheduler
-- A retried load starts from an empty table: BULK INSERT and bulk copy commit every BATCHSIZE
-- rows, so a failed attempt leaves its first batches behind, and the retry reruns this step
-- alone (not prepare). TRUNCATE TABLE deallocates the pages (minimally logged, so the load
-- that follows still fills an empty heap) and keeps the range CHECK constraint trusted.
TRUNCATE TABLE [tpch_staging].[orders_1]
-- DATAFILETYPE 'char': every field is taken as it is between its terminators (a backslash
-- is an ordinary byte).
-- CODEPAGE 65001: the file's UTF-8 text is converted to each column's code page; exact
-- in nchar/nvarchar and _UTF8-collated columns (a character outside a single-byte
-- column's code page cannot be stored exactly by any load). SQL Server on Linux takes
-- CODEPAGE RAW only (2019+, none before): the loader uses that there.
-- KEEPNULLS: BULK INSERT reads an empty field as NULL, and without KEEPNULLS a column's
-- default replaces it
-- (https://learn.microsoft.com/en-us/sql/relational-databases/import-export/keep-nulls-or-use-default-values-during-bulk-import-sql-server):
-- with it an empty field is NULL, never a column default. NULL is what a nullable column's empty
-- field means here (the spec's NULL marker is the empty field); in a NOT NULL column, where
-- the spec means an empty string, the server refuses the NULL (error 515) and the loader
-- loads the file over the client path instead, which stores ''.
-- TABLOCK into an empty heap: minimally logged under SIMPLE or BULK_LOGGED recovery.
-- CHECK_CONSTRAINTS keeps the range constraint trusted for SWITCH (without it the load
-- marks the constraint untrusted). MAXERRORS = 0: no bad line is skipped. Dates as
-- yyyy-mm-dd, read the same under every DATEFORMAT for date and datetime2; SET DATEFORMAT
-- ymd makes it so for datetime and smalldatetime too.
SET DATEFORMAT ymd
-- The row terminator '|' + LF holds a control character: BULK INSERT takes only
-- literals, so it is built with NCHAR() and the statement run by sp_executesql, as the BULK
-- INSERT documentation builds an LF terminator ('\n' would mean CR LF to SQL Server, and no
-- line break is written inside a string literal here). The variable goes inside a literal of
-- that statement, so its quotes are doubled there (a `'` delimiter folded into the terminator).
DECLARE @rowterminator nvarchar(12) = N'|' + NCHAR(10)
DECLARE @load nvarchar(max) = N'BULK INSERT [tpch_staging].[orders_1] FROM ''/var/opt/mssql/switchyard/batch/orders/orders.1.tbl'' WITH (DATAFILETYPE = ''char'', FIELDTERMINATOR = ''|'', ROWTERMINATOR = ''' + REPLACE(@rowterminator, N'''', N'''''') + N''', CODEPAGE = ''65001'', KEEPNULLS, TABLOCK, CHECK_CONSTRAINTS, BATCHSIZE = 100000, MAXERRORS = 0)'
EXEC sys.sp_executesql @load;
GO
-- SWITCH refuses an untrusted CHECK constraint. The load checked every row, so this finds
-- the constraint trusted and costs nothing; after a load that bypassed the check (another
-- tool, a TDS copy without check_constraints) it re-validates once, with one scan.
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID(N'[tpch_staging].[orders_1]') AND name = N'orders_1_range' AND is_not_trusted = 1)
    ALTER TABLE [tpch_staging].[orders_1] WITH CHECK CHECK CONSTRAINT [orders_1_range];
GO
-- switch: the target's indexes built on tpch_staging.orders_1 (none on a table setup made from the spec), then the stream is marked ready; the batch's publish moves it in with every table of the batch

-- orders_2: orders/orders.2.tbl, keys 2001..4000, filegroup fg2, port 2001
-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS [tpch_staging].[orders_2];
GO
-- A heap with no index, on its partition's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged; the target's indexes are built on it after validation, before
-- the switch.
-- The target's columns as the catalog has them (names, types, lengths, collation,
-- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
-- compression: SWITCH needs both equal to the partition's.
CREATE TABLE [tpch_staging].[orders_2] (
    [o_orderkey] bigint NOT NULL,
    [o_custkey] bigint NOT NULL,
    [o_orderstatus] char(1) NOT NULL,
    [o_totalprice] money NOT NULL,
    [o_orderdate] date NOT NULL,
    [o_orderpriority] char(15) NOT NULL,
    [o_clerk] char(15) NOT NULL,
    [o_shippriority] integer NOT NULL,
    [o_comment] varchar(79) NOT NULL
) ON [fg2];
GO
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one. IS NOT NULL: with it SWITCH can
-- prove every row belongs to a partition other than the first even when the target's key
-- column allows NULL (NULL sorts into the first partition; Msg 4982 otherwise).
ALTER TABLE [tpch_staging].[orders_2] WITH CHECK
    ADD CONSTRAINT [orders_2_range] CHECK ([o_orderkey] IS NOT NULL AND [o_orderkey] >= 2001 AND [o_orderkey] <= 4000);
GO
-- One load per scheduler, as the 2010 record run did it: the request runs on one scheduler
-- for its whole batch, so the claim and the BULK INSERT below are on the same one. The
-- session-owned applock names the scheduler; a second load there fails at once (error
-- 51001) and the loader reconnects to land elsewhere. The scheduler is kept in the
-- session context for the statistics read after the load.
DECLARE @scheduler int = (SELECT scheduler_id FROM sys.dm_exec_requests WHERE session_id = @@SPID)
DECLARE @resource nvarchar(255) = CONCAT(N'switchyard.scheduler.', @scheduler)
DECLARE @rc int
EXEC @rc = sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0
IF @rc < 0
    THROW 51001, N'switchyard: another load holds this scheduler', 1
EXEC sp_set_session_context N'switchyard.scheduler', @scheduler
-- A retried load starts from an empty table: BULK INSERT and bulk copy commit every BATCHSIZE
-- rows, so a failed attempt leaves its first batches behind, and the retry reruns this step
-- alone (not prepare). TRUNCATE TABLE deallocates the pages (minimally logged, so the load
-- that follows still fills an empty heap) and keeps the range CHECK constraint trusted.
TRUNCATE TABLE [tpch_staging].[orders_2]
-- DATAFILETYPE 'char': every field is taken as it is between its terminators (a backslash
-- is an ordinary byte).
-- CODEPAGE 65001: the file's UTF-8 text is converted to each column's code page; exact
-- in nchar/nvarchar and _UTF8-collated columns (a character outside a single-byte
-- column's code page cannot be stored exactly by any load). SQL Server on Linux takes
-- CODEPAGE RAW only (2019+, none before): the loader uses that there.
-- KEEPNULLS: BULK INSERT reads an empty field as NULL, and without KEEPNULLS a column's
-- default replaces it
-- (https://learn.microsoft.com/en-us/sql/relational-databases/import-export/keep-nulls-or-use-default-values-during-bulk-import-sql-server):
-- with it an empty field is NULL, never a column default. NULL is what a nullable column's empty
-- field means here (the spec's NULL marker is the empty field); in a NOT NULL column, where
-- the spec means an empty string, the server refuses the NULL (error 515) and the loader
-- loads the file over the client path instead, which stores ''.
-- TABLOCK into an empty heap: minimally logged under SIMPLE or BULK_LOGGED recovery.
-- CHECK_CONSTRAINTS keeps the range constraint trusted for SWITCH (without it the load
-- marks the constraint untrusted). MAXERRORS = 0: no bad line is skipped. Dates as
-- yyyy-mm-dd, read the same under every DATEFORMAT for date and datetime2; SET DATEFORMAT
-- ymd makes it so for datetime and smalldatetime too.
SET DATEFORMAT ymd
-- The row terminator '|' + LF holds a control character: BULK INSERT takes only
-- literals, so it is built with NCHAR() and the statement run by sp_executesql, as the BULK
-- INSERT documentation builds an LF terminator ('\n' would mean CR LF to SQL Server, and no
-- line break is written inside a string literal here). The variable goes inside a literal of
-- that statement, so its quotes are doubled there (a `'` delimiter folded into the terminator).
DECLARE @rowterminator nvarchar(12) = N'|' + NCHAR(10)
DECLARE @load nvarchar(max) = N'BULK INSERT [tpch_staging].[orders_2] FROM ''/var/opt/mssql/switchyard/batch/orders/orders.2.tbl'' WITH (DATAFILETYPE = ''char'', FIELDTERMINATOR = ''|'', ROWTERMINATOR = ''' + REPLACE(@rowterminator, N'''', N'''''') + N''', CODEPAGE = ''65001'', KEEPNULLS, TABLOCK, CHECK_CONSTRAINTS, BATCHSIZE = 100000, MAXERRORS = 0)'
EXEC sys.sp_executesql @load;
GO
-- SWITCH refuses an untrusted CHECK constraint. The load checked every row, so this finds
-- the constraint trusted and costs nothing; after a load that bypassed the check (another
-- tool, a TDS copy without check_constraints) it re-validates once, with one scan.
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID(N'[tpch_staging].[orders_2]') AND name = N'orders_2_range' AND is_not_trusted = 1)
    ALTER TABLE [tpch_staging].[orders_2] WITH CHECK CHECK CONSTRAINT [orders_2_range];
GO
-- switch: the target's indexes built on tpch_staging.orders_2 (none on a table setup made from the spec), then the stream is marked ready; the batch's publish moves it in with every table of the batch

-- orders_3: orders/orders.3.tbl, keys 4001..6000, filegroup fg3, port 2002
-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS [tpch_staging].[orders_3];
GO
-- A heap with no index, on its partition's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged; the target's indexes are built on it after validation, before
-- the switch.
-- The target's columns as the catalog has them (names, types, lengths, collation,
-- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
-- compression: SWITCH needs both equal to the partition's.
CREATE TABLE [tpch_staging].[orders_3] (
    [o_orderkey] bigint NOT NULL,
    [o_custkey] bigint NOT NULL,
    [o_orderstatus] char(1) NOT NULL,
    [o_totalprice] money NOT NULL,
    [o_orderdate] date NOT NULL,
    [o_orderpriority] char(15) NOT NULL,
    [o_clerk] char(15) NOT NULL,
    [o_shippriority] integer NOT NULL,
    [o_comment] varchar(79) NOT NULL
) ON [fg3];
GO
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one. IS NOT NULL: with it SWITCH can
-- prove every row belongs to a partition other than the first even when the target's key
-- column allows NULL (NULL sorts into the first partition; Msg 4982 otherwise).
ALTER TABLE [tpch_staging].[orders_3] WITH CHECK
    ADD CONSTRAINT [orders_3_range] CHECK ([o_orderkey] IS NOT NULL AND [o_orderkey] >= 4001 AND [o_orderkey] <= 6000);
GO
-- One load per scheduler, as the 2010 record run did it: the request runs on one scheduler
-- for its whole batch, so the claim and the BULK INSERT below are on the same one. The
-- session-owned applock names the scheduler; a second load there fails at once (error
-- 51001) and the loader reconnects to land elsewhere. The scheduler is kept in the
-- session context for the statistics read after the load.
DECLARE @scheduler int = (SELECT scheduler_id FROM sys.dm_exec_requests WHERE session_id = @@SPID)
DECLARE @resource nvarchar(255) = CONCAT(N'switchyard.scheduler.', @scheduler)
DECLARE @rc int
EXEC @rc = sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0
IF @rc < 0
    THROW 51001, N'switchyard: another load holds this scheduler', 1
EXEC sp_set_session_context N'switchyard.scheduler', @scheduler
-- A retried load starts from an empty table: BULK INSERT and bulk copy commit every BATCHSIZE
-- rows, so a failed attempt leaves its first batches behind, and the retry reruns this step
-- alone (not prepare). TRUNCATE TABLE deallocates the pages (minimally logged, so the load
-- that follows still fills an empty heap) and keeps the range CHECK constraint trusted.
TRUNCATE TABLE [tpch_staging].[orders_3]
-- DATAFILETYPE 'char': every field is taken as it is between its terminators (a backslash
-- is an ordinary byte).
-- CODEPAGE 65001: the file's UTF-8 text is converted to each column's code page; exact
-- in nchar/nvarchar and _UTF8-collated columns (a character outside a single-byte
-- column's code page cannot be stored exactly by any load). SQL Server on Linux takes
-- CODEPAGE RAW only (2019+, none before): the loader uses that there.
-- KEEPNULLS: BULK INSERT reads an empty field as NULL, and without KEEPNULLS a column's
-- default replaces it
-- (https://learn.microsoft.com/en-us/sql/relational-databases/import-export/keep-nulls-or-use-default-values-during-bulk-import-sql-server):
-- with it an empty field is NULL, never a column default. NULL is what a nullable column's empty
-- field means here (the spec's NULL marker is the empty field); in a NOT NULL column, where
-- the spec means an empty string, the server refuses the NULL (error 515) and the loader
-- loads the file over the client path instead, which stores ''.
-- TABLOCK into an empty heap: minimally logged under SIMPLE or BULK_LOGGED recovery.
-- CHECK_CONSTRAINTS keeps the range constraint trusted for SWITCH (without it the load
-- marks the constraint untrusted). MAXERRORS = 0: no bad line is skipped. Dates as
-- yyyy-mm-dd, read the same under every DATEFORMAT for date and datetime2; SET DATEFORMAT
-- ymd makes it so for datetime and smalldatetime too.
SET DATEFORMAT ymd
-- The row terminator '|' + LF holds a control character: BULK INSERT takes only
-- literals, so it is built with NCHAR() and the statement run by sp_executesql, as the BULK
-- INSERT documentation builds an LF terminator ('\n' would mean CR LF to SQL Server, and no
-- line break is written inside a string literal here). The variable goes inside a literal of
-- that statement, so its quotes are doubled there (a `'` delimiter folded into the terminator).
DECLARE @rowterminator nvarchar(12) = N'|' + NCHAR(10)
DECLARE @load nvarchar(max) = N'BULK INSERT [tpch_staging].[orders_3] FROM ''/var/opt/mssql/switchyard/batch/orders/orders.3.tbl'' WITH (DATAFILETYPE = ''char'', FIELDTERMINATOR = ''|'', ROWTERMINATOR = ''' + REPLACE(@rowterminator, N'''', N'''''') + N''', CODEPAGE = ''65001'', KEEPNULLS, TABLOCK, CHECK_CONSTRAINTS, BATCHSIZE = 100000, MAXERRORS = 0)'
EXEC sys.sp_executesql @load;
GO
-- SWITCH refuses an untrusted CHECK constraint. The load checked every row, so this finds
-- the constraint trusted and costs nothing; after a load that bypassed the check (another
-- tool, a TDS copy without check_constraints) it re-validates once, with one scan.
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID(N'[tpch_staging].[orders_3]') AND name = N'orders_3_range' AND is_not_trusted = 1)
    ALTER TABLE [tpch_staging].[orders_3] WITH CHECK CHECK CONSTRAINT [orders_3_range];
GO
-- switch: the target's indexes built on tpch_staging.orders_3 (none on a table setup made from the spec), then the stream is marked ready; the batch's publish moves it in with every table of the batch

-- orders_4: orders/orders.4.tbl, keys 6001..8000, filegroup fg4, port 2003
-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS [tpch_staging].[orders_4];
GO
-- A heap with no index, on its partition's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged; the target's indexes are built on it after validation, before
-- the switch.
-- The target's columns as the catalog has them (names, types, lengths, collation,
-- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
-- compression: SWITCH needs both equal to the partition's.
CREATE TABLE [tpch_staging].[orders_4] (
    [o_orderkey] bigint NOT NULL,
    [o_custkey] bigint NOT NULL,
    [o_orderstatus] char(1) NOT NULL,
    [o_totalprice] money NOT NULL,
    [o_orderdate] date NOT NULL,
    [o_orderpriority] char(15) NOT NULL,
    [o_clerk] char(15) NOT NULL,
    [o_shippriority] integer NOT NULL,
    [o_comment] varchar(79) NOT NULL
) ON [fg4];
GO
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one. IS NOT NULL: with it SWITCH can
-- prove every row belongs to a partition other than the first even when the target's key
-- column allows NULL (NULL sorts into the first partition; Msg 4982 otherwise).
ALTER TABLE [tpch_staging].[orders_4] WITH CHECK
    ADD CONSTRAINT [orders_4_range] CHECK ([o_orderkey] IS NOT NULL AND [o_orderkey] >= 6001 AND [o_orderkey] <= 8000);
GO
-- One load per scheduler, as the 2010 record run did it: the request runs on one scheduler
-- for its whole batch, so the claim and the BULK INSERT below are on the same one. The
-- session-owned applock names the scheduler; a second load there fails at once (error
-- 51001) and the loader reconnects to land elsewhere. The scheduler is kept in the
-- session context for the statistics read after the load.
DECLARE @scheduler int = (SELECT scheduler_id FROM sys.dm_exec_requests WHERE session_id = @@SPID)
DECLARE @resource nvarchar(255) = CONCAT(N'switchyard.scheduler.', @scheduler)
DECLARE @rc int
EXEC @rc = sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0
IF @rc < 0
    THROW 51001, N'switchyard: another load holds this scheduler', 1
EXEC sp_set_session_context N'switchyard.scheduler', @scheduler
-- A retried load starts from an empty table: BULK INSERT and bulk copy commit every BATCHSIZE
-- rows, so a failed attempt leaves its first batches behind, and the retry reruns this step
-- alone (not prepare). TRUNCATE TABLE deallocates the pages (minimally logged, so the load
-- that follows still fills an empty heap) and keeps the range CHECK constraint trusted.
TRUNCATE TABLE [tpch_staging].[orders_4]
-- DATAFILETYPE 'char': every field is taken as it is between its terminators (a backslash
-- is an ordinary byte).
-- CODEPAGE 65001: the file's UTF-8 text is converted to each column's code page; exact
-- in nchar/nvarchar and _UTF8-collated columns (a character outside a single-byte
-- column's code page cannot be stored exactly by any load). SQL Server on Linux takes
-- CODEPAGE RAW only (2019+, none before): the loader uses that there.
-- KEEPNULLS: BULK INSERT reads an empty field as NULL, and without KEEPNULLS a column's
-- default replaces it
-- (https://learn.microsoft.com/en-us/sql/relational-databases/import-export/keep-nulls-or-use-default-values-during-bulk-import-sql-server):
-- with it an empty field is NULL, never a column default. NULL is what a nullable column's empty
-- field means here (the spec's NULL marker is the empty field); in a NOT NULL column, where
-- the spec means an empty string, the server refuses the NULL (error 515) and the loader
-- loads the file over the client path instead, which stores ''.
-- TABLOCK into an empty heap: minimally logged under SIMPLE or BULK_LOGGED recovery.
-- CHECK_CONSTRAINTS keeps the range constraint trusted for SWITCH (without it the load
-- marks the constraint untrusted). MAXERRORS = 0: no bad line is skipped. Dates as
-- yyyy-mm-dd, read the same under every DATEFORMAT for date and datetime2; SET DATEFORMAT
-- ymd makes it so for datetime and smalldatetime too.
SET DATEFORMAT ymd
-- The row terminator '|' + LF holds a control character: BULK INSERT takes only
-- literals, so it is built with NCHAR() and the statement run by sp_executesql, as the BULK
-- INSERT documentation builds an LF terminator ('\n' would mean CR LF to SQL Server, and no
-- line break is written inside a string literal here). The variable goes inside a literal of
-- that statement, so its quotes are doubled there (a `'` delimiter folded into the terminator).
DECLARE @rowterminator nvarchar(12) = N'|' + NCHAR(10)
DECLARE @load nvarchar(max) = N'BULK INSERT [tpch_staging].[orders_4] FROM ''/var/opt/mssql/switchyard/batch/orders/orders.4.tbl'' WITH (DATAFILETYPE = ''char'', FIELDTERMINATOR = ''|'', ROWTERMINATOR = ''' + REPLACE(@rowterminator, N'''', N'''''') + N''', CODEPAGE = ''65001'', KEEPNULLS, TABLOCK, CHECK_CONSTRAINTS, BATCHSIZE = 100000, MAXERRORS = 0)'
EXEC sys.sp_executesql @load;
GO
-- SWITCH refuses an untrusted CHECK constraint. The load checked every row, so this finds
-- the constraint trusted and costs nothing; after a load that bypassed the check (another
-- tool, a TDS copy without check_constraints) it re-validates once, with one scan.
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID(N'[tpch_staging].[orders_4]') AND name = N'orders_4_range' AND is_not_trusted = 1)
    ALTER TABLE [tpch_staging].[orders_4] WITH CHECK CHECK CONSTRAINT [orders_4_range];
GO
-- switch: the target's indexes built on tpch_staging.orders_4 (none on a table setup made from the spec), then the stream is marked ready; the batch's publish moves it in with every table of the batch

-- publish_batch: once every group of the run is validated and staged, every table of the batch goes in, in one transaction
-- tpch: batch batch goes in whole: lineitem, orders, nation, every table in one
-- transaction, run by the publish_batch task once every stream of the batch is validated and
-- staged (publish: batch). Readers see the previous batch or this one, across tables, never a
-- mix: with XACT_ABORT any error rolls the whole transaction back, and every table stays as it
-- was (https://learn.microsoft.com/en-us/sql/t-sql/statements/set-xact-abort-transact-sql).
-- Each table's steps are the ones its own commit runs with publish: table; the partitioned
-- tables first, in name order, then the unpartitioned ones (an unpartitioned table replaced by
-- TRUNCATE TABLE cannot take its lock at low priority, and only the first table's request waits
-- that way).
-- Locks. Each table's first step (TRUNCATE TABLE, ALTER PARTITION FUNCTION or SWITCH) takes a
-- schema-modification (Sch-M) lock on it, and a transaction holds its locks until it ends: the
-- tables are taken one after another, and every one stays taken until COMMIT. Sch-M is
-- compatible with no other lock, not even the Sch-S of a reader under READ UNCOMMITTED or
-- snapshot isolation, and a request that waits for it blocks every request for the table that
-- comes after it
-- (https://learn.microsoft.com/en-us/sql/relational-databases/sql-server-transaction-locking-and-row-versioning-guide#lock_compatibility).
-- The transaction's first table is taken at low priority (WAIT_AT_LOW_PRIORITY, out of the
-- queue) unless it is an unpartitioned table replaced by TRUNCATE TABLE: by its first step when
-- that is a SWITCH, else by switching one of its empty partitions out to an empty table that is
-- then dropped (no row and no partition changes); no other table is held while it waits. Each
-- later table's first step may ask at normal priority: for those the whole transaction runs
-- under a short LOCK_TIMEOUT (1000 ms per lock request,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/set-lock-timeout-transact-sql): a
-- normal-priority request behind a long reader of any table gives up after that long (error
-- 1222), the whole transaction rolls back (nothing changed; the locks it held are released), the
-- readers it held up go on, and the adapter runs the publish again after a pause
-- (30 attempts in all). The tables are taken in that order, every publish alike.
-- What readers wait: a reader of a table taken early waits for the rest of the transaction, that
-- is the later tables' lock requests (each at most 1000 ms), their catalog changes, and
-- the copy of the rows of any unpartitioned table replaced by TRUNCATE TABLE and INSERT. Worst
-- case per attempt: 3 x 1000 ms of lock requests plus the transaction's own work.
-- A later table whose first step is a SWITCH (append mode with nothing to empty or retire, a
-- new table, an unpartitioned table switched in whole) asks at normal priority too: at low
-- priority (WAIT_AT_LOW_PRIORITY, MAX_DURATION = 1 MINUTES,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql#wait_at_low_priority)
-- its own readers would not queue behind the request, but the tables taken before it would
-- stay taken while it waited, up to that long.
-- In a deadlock with a reader this transaction is the one SQL Server rolls back (the session
-- of lower DEADLOCK_PRIORITY is the victim,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/set-deadlock-priority-transact-sql):
-- the reader's query goes on, and the adapter runs the whole transaction again (error 1205).
SET XACT_ABORT ON
SET LOCK_TIMEOUT 1000
SET DEADLOCK_PRIORITY LOW
DECLARE @partition int
BEGIN TRY
    BEGIN TRANSACTION
    -- The next versions of the tables switched in whole, counted before any table is taken: an
    -- exclusive table lock held to COMMIT (TABLOCKX, HOLDLOCK) keeps each as counted. Validation
    -- counted them; another count now means one changed since.
    IF (SELECT COUNT_BIG(*) FROM [tpch_staging].[nation__next] WITH (TABLOCKX, HOLDLOCK)) <> 25 THROW 51012, N'tpch.nation: the rows to publish are not the 25 the manifest says; nothing was published', 1
    -- SWITCH needs an empty target: the rows of tpch.nation go first to [tpch_staging].[nation__old], an empty
    -- table made to its shape on its filegroup PRIMARY, made here before any table is
    -- taken, so no reader waits for it.
    DROP TABLE IF EXISTS [tpch_staging].[nation__old]
    -- The target's columns as the catalog has them (names, types, lengths, collation,
    -- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
    -- compression: SWITCH needs both equal to the partition's.
    CREATE TABLE [tpch_staging].[nation__old] (
        [n_nationkey] integer NOT NULL,
        [n_name] char(25) NOT NULL,
        [n_regionkey] integer NOT NULL,
        [n_comment] varchar(152) NOT NULL
    ) ON [PRIMARY]

    -- tpch.lineitem (append mode): its steps, as its own commit runs them, from its window planned now.
    -- Stream 1 (keys 8001..9000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg1 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_lineitem](9000)
    ALTER TABLE [tpch_staging].[lineitem_1] SWITCH TO [tpch].[lineitem] PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[lineitem_1]
    -- Stream 2 (keys 9001..10000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg2 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_lineitem](10000)
    ALTER TABLE [tpch_staging].[lineitem_2] SWITCH TO [tpch].[lineitem] PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[lineitem_2]
    -- The batch each partition holds, for the next batch's pre-flight; this run's plan is done.
    DELETE FROM [switchyard].[partition_batches] WHERE target_schema = N'tpch' AND table_name = N'lineitem'
        AND key_max IN (N'10000', N'9000')
    INSERT INTO [switchyard].[partition_batches] (target_schema, table_name, key_min, key_max, batch, run, rows_planned, switched_at)
    VALUES
        (N'tpch', N'lineitem', N'8001', N'9000', N'batch', N'', 400, SYSUTCDATETIME()),
        (N'tpch', N'lineitem', N'9001', N'10000', N'batch', N'', 400, SYSUTCDATETIME())
    DELETE FROM [switchyard].[planned_partitions] WHERE target_schema = N'tpch' AND table_name = N'lineitem'
    -- tpch.orders (replace mode): its steps, as its own commit runs them, from its window planned now.
    -- Stream 1 (keys 1..2000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg1 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](2000)
    ALTER TABLE [tpch_staging].[orders_1] SWITCH TO [tpch].[orders] PARTITION @partition
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_1]
    -- Stream 2 (keys 2001..4000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg2 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](4000)
    ALTER TABLE [tpch_staging].[orders_2] SWITCH TO [tpch].[orders] PARTITION @partition
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_2]
    -- Stream 3 (keys 4001..6000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg3 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](6000)
    ALTER TABLE [tpch_staging].[orders_3] SWITCH TO [tpch].[orders] PARTITION @partition
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_3]
    -- Stream 4 (keys 6001..8000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg4 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](8000)
    ALTER TABLE [tpch_staging].[orders_4] SWITCH TO [tpch].[orders] PARTITION @partition
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_4]
    -- The batch each partition holds, for the next batch's pre-flight; this run's plan is done.
    DELETE FROM [switchyard].[partition_batches] WHERE target_schema = N'tpch' AND table_name = N'orders'
    INSERT INTO [switchyard].[partition_batches] (target_schema, table_name, key_min, key_max, batch, run, rows_planned, switched_at)
    VALUES
        (N'tpch', N'orders', N'1', N'2000', N'batch', N'', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'2001', N'4000', N'batch', N'', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'4001', N'6000', N'batch', N'', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'6001', N'8000', N'batch', N'', 100, SYSUTCDATETIME())
    DELETE FROM [switchyard].[planned_partitions] WHERE target_schema = N'tpch' AND table_name = N'orders'
    -- tpch.nation (unpartitioned, replaced whole): its next version switched in. SWITCH keeps the
    -- table itself (its grants, the views on it).
    -- [tpch_staging].[nation__next] was made to the table's shape (its columns, filegroup, data compression and
    -- CHECK constraints at prepare, its indexes before this step), so SWITCH moves whole tables
    -- by metadata only: no row is copied while the table is taken.
    -- This SWITCH takes the table's Sch-M lock at normal priority, under the transaction's short
    -- LOCK_TIMEOUT: a low-priority wait would hold the tables taken before it.
    ALTER TABLE [tpch].[nation] SWITCH TO [tpch_staging].[nation__old]
    -- The table is empty now, and this transaction holds its lock to COMMIT: its next version
    -- goes in.
    ALTER TABLE [tpch_staging].[nation__next] SWITCH TO [tpch].[nation]
    -- DROP TABLE is transactional: the previous rows and the (now empty) next version go with the
    -- commit that replaced them. A large table's pages are deallocated after the COMMIT
    -- (https://learn.microsoft.com/en-us/sql/relational-databases/indexes/drop-and-rebuild-large-objects).
    DROP TABLE [tpch_staging].[nation__old]
    DROP TABLE [tpch_staging].[nation__next]
    -- The batch the table holds, one row for the whole table (no key range).
    DELETE FROM [switchyard].[partition_batches] WHERE target_schema = N'tpch' AND table_name = N'nation'
    INSERT INTO [switchyard].[partition_batches] (target_schema, table_name, key_min, key_max, batch, run, rows_planned, switched_at)
    VALUES (N'tpch', N'nation', N'', N'', N'batch', N'', 25, SYSUTCDATETIME())
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;
GO

-- tpch.orders: batch d goes in whole (append mode), in one transaction run by the
-- table's last switch once every stream of the batch is validated and staged. Readers see the
-- table before the batch or after it, never a mix: every statement below is part of one
-- transaction (XACT_ABORT: any error rolls all of it back, and the table stays as it was).
-- Locks. SWITCH, TRUNCATE and ALTER PARTITION FUNCTION take a schema-modification (Sch-M)
-- lock on the table (ALTER PARTITION FUNCTION on every table and index on the function), held
-- to COMMIT. Sch-M is compatible with no other lock, not even the Sch-S of a reader under READ
-- UNCOMMITTED or snapshot isolation, and a request that waits for it blocks every request for
-- the table that comes after it: readers queue behind the commit's waiting request, not only
-- behind its granted lock
-- (https://learn.microsoft.com/en-us/sql/relational-databases/sql-server-transaction-locking-and-row-versioning-guide#lock_compatibility).
-- Only SWITCH can wait at low priority, out of that queue (WAIT_AT_LOW_PRIORITY,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql#wait_at_low_priority);
-- TRUNCATE TABLE ... WITH (PARTITIONS) and ALTER PARTITION FUNCTION ... SPLIT / MERGE ask at
-- normal priority. So the table is taken by a SWITCH first: when the first step would be one
-- of those, an empty partition is switched out at low priority to an empty table that is then
-- dropped (no row and no partition changes). Once the first Sch-M is granted the table is this
-- transaction's: the later steps on it do not wait for readers again, and every step is
-- metadata only (empty partitions), so readers wait for the catalog changes alone. Without an
-- empty partition the first request is at normal priority; for it the whole transaction runs
-- under a short LOCK_TIMEOUT
-- (1000 ms, https://learn.microsoft.com/en-us/sql/t-sql/statements/set-lock-timeout-transact-sql):
-- a normal-priority request behind a long reader gives up after that long (error 1222), the
-- transaction rolls back whole (nothing changed), the queue it held up moves on, and the
-- adapter runs the commit again after a pause (30 attempts in all); a new
-- reader then waits at most 1000 ms per attempt while the request is
-- queued, plus the transaction's own catalog work.
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
    -- keep: 3 batches; retired: a: partition 2 (keys 1..1000, 100 rows) switched out to
    -- [tpch_archive].[orders_1_1000], an empty table made to the target's shape on the partition's filegroup
    -- fg1 (SWITCH out needs an empty target on the same filegroup).
    -- The target's columns as the catalog has them (names, types, lengths, collation,
    -- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
    -- compression: SWITCH needs both equal to the partition's.
    CREATE TABLE [tpch_archive].[orders_1_1000] (
        [o_orderkey] bigint NOT NULL,
        [o_custkey] bigint NOT NULL,
        [o_orderstatus] char(1) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [o_totalprice] money NOT NULL,
        [o_orderdate] date NOT NULL,
        [o_orderpriority] char(15) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [o_clerk] char(15) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [o_shippriority] int NOT NULL,
        [o_comment] varchar(79) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL
    ) ON [fg1]
    SET @partition = $PARTITION.[pf_tpch_orders](1000)
    IF @partition <> 2 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    ALTER TABLE [tpch].[orders] SWITCH PARTITION @partition TO [tpch_archive].[orders_1_1000]
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- keep: 3 batches; retired: a: partition 3 (keys 1001..2000, 100 rows) switched out to
    -- [tpch_archive].[orders_1001_2000], an empty table made to the target's shape on the partition's filegroup
    -- fg2 (SWITCH out needs an empty target on the same filegroup).
    -- The target's columns as the catalog has them (names, types, lengths, collation,
    -- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
    -- compression: SWITCH needs both equal to the partition's.
    CREATE TABLE [tpch_archive].[orders_1001_2000] (
        [o_orderkey] bigint NOT NULL,
        [o_custkey] bigint NOT NULL,
        [o_orderstatus] char(1) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [o_totalprice] money NOT NULL,
        [o_orderdate] date NOT NULL,
        [o_orderpriority] char(15) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [o_clerk] char(15) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [o_shippriority] int NOT NULL,
        [o_comment] varchar(79) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL
    ) ON [fg2]
    SET @partition = $PARTITION.[pf_tpch_orders](2000)
    IF @partition <> 3 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    ALTER TABLE [tpch].[orders] SWITCH PARTITION @partition TO [tpch_archive].[orders_1001_2000]
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- MERGE RANGE (0): no partition needs this boundary any more. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](0)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (0) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (0)
    -- MERGE RANGE (1000): no partition needs this boundary any more. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](1000)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (1000) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (1000)
    -- SPLIT RANGE (7000): closes stream 1's partition. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN ($PARTITION.[pf_tpch_orders](7000))) THROW 51014, N'tpch.orders: the partition SPLIT RANGE (7000) divides held rows, though read empty; nothing was changed', 1
    ALTER PARTITION SCHEME [ps_tpch_orders] NEXT USED [fg1]
    ALTER PARTITION FUNCTION [pf_tpch_orders]() SPLIT RANGE (7000)
    -- SPLIT RANGE (8000): closes stream 2's partition. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN ($PARTITION.[pf_tpch_orders](8000))) THROW 51014, N'tpch.orders: the partition SPLIT RANGE (8000) divides held rows, though read empty; nothing was changed', 1
    ALTER PARTITION SCHEME [ps_tpch_orders] NEXT USED [fg2]
    ALTER PARTITION FUNCTION [pf_tpch_orders]() SPLIT RANGE (8000)
    -- Stream 1 (keys 6001..7000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg1 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](7000)
    ALTER TABLE [tpch_staging].[orders_1] SWITCH TO [tpch].[orders] PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_1]
    -- Stream 2 (keys 7001..8000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg2 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](8000)
    ALTER TABLE [tpch_staging].[orders_2] SWITCH TO [tpch].[orders] PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_2]
    -- The batch each partition holds, for the next batch's pre-flight; this run's plan is done.
    DELETE FROM [switchyard].[partition_batches] WHERE target_schema = N'tpch' AND table_name = N'orders'
        AND key_max IN (N'1000', N'2000', N'7000', N'8000')
    INSERT INTO [switchyard].[partition_batches] (target_schema, table_name, key_min, key_max, batch, run, rows_planned, switched_at)
    VALUES
        (N'tpch', N'orders', N'6001', N'7000', N'd', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'7001', N'8000', N'd', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME())
    DELETE FROM [switchyard].[planned_partitions] WHERE target_schema = N'tpch' AND table_name = N'orders'
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;
GO

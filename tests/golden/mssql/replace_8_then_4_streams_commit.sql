-- tpch.orders: batch 2026-04-05 goes in whole (replace mode), in one transaction run by the
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
    -- The table's Sch-M lock first, at low priority: the steps after this one would ask for it at
    -- normal priority, and new readers queue behind such a request. Partition 1 (keys up to 0) is
    -- empty: switched out to [tpch_staging].[orders__lock], an empty table made to the target's shape on
    -- the partition's filegroup fg_edge, then dropped. No row and no partition changes; the
    -- transaction keeps the lock to its COMMIT.
    -- The target's columns as the catalog has them (names, types, lengths, collation,
    -- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
    -- compression: SWITCH needs both equal to the partition's.
    CREATE TABLE [tpch_staging].[orders__lock] (
        [o_orderkey] bigint NOT NULL,
        [o_custkey] bigint NOT NULL,
        [o_orderstatus] char(1) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [o_totalprice] money NOT NULL,
        [o_orderdate] date NOT NULL,
        [o_orderpriority] char(15) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [o_clerk] char(15) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [o_shippriority] int NOT NULL,
        [o_comment] varchar(79) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL
    ) ON [fg_edge]
    SET @partition = $PARTITION.[pf_tpch_orders](0)
    IF @partition <> 1 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    ALTER TABLE [tpch].[orders] SWITCH PARTITION @partition TO [tpch_staging].[orders__lock]
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- The partition was read empty before this transaction, from sys.partitions, whose row
    -- counts are approximate (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-partitions-transact-sql),
    -- and rows may have come since: the probe is dropped only if it is empty. Otherwise the
    -- commit stops and rolls back (the rows switch back); the task's retry reads the catalog again.
    IF EXISTS (SELECT 1 FROM [tpch_staging].[orders__lock]) THROW 51013, N'tpch.orders: partition 1 held rows when this commit took its lock, though read empty; nothing was changed', 1
    DROP TABLE [tpch_staging].[orders__lock]
    -- replace mode: gives way to batch 2026-04-05: partition 2 (keys 1..1000, 100 rows). The partition numbers
    -- are the catalog's as read for this commit (no MERGE or SPLIT ran before); the check
    -- stops the commit if the function changed since. TRUNCATE ... WITH (PARTITIONS) (2016+)
    -- needs every index aligned; it deallocates the partition's pages (deferred for large ones).
    IF $PARTITION.[pf_tpch_orders](1000) <> 2 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS (2))
    -- replace mode: gives way to batch 2026-04-05: partition 3 (keys 1001..2000, 100 rows). The partition numbers
    -- are the catalog's as read for this commit (no MERGE or SPLIT ran before); the check
    -- stops the commit if the function changed since. TRUNCATE ... WITH (PARTITIONS) (2016+)
    -- needs every index aligned; it deallocates the partition's pages (deferred for large ones).
    IF $PARTITION.[pf_tpch_orders](2000) <> 3 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS (3))
    -- replace mode: gives way to batch 2026-04-05: partition 4 (keys 2001..3000, 100 rows). The partition numbers
    -- are the catalog's as read for this commit (no MERGE or SPLIT ran before); the check
    -- stops the commit if the function changed since. TRUNCATE ... WITH (PARTITIONS) (2016+)
    -- needs every index aligned; it deallocates the partition's pages (deferred for large ones).
    IF $PARTITION.[pf_tpch_orders](3000) <> 4 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS (4))
    -- replace mode: gives way to batch 2026-04-05: partition 5 (keys 3001..4000, 100 rows). The partition numbers
    -- are the catalog's as read for this commit (no MERGE or SPLIT ran before); the check
    -- stops the commit if the function changed since. TRUNCATE ... WITH (PARTITIONS) (2016+)
    -- needs every index aligned; it deallocates the partition's pages (deferred for large ones).
    IF $PARTITION.[pf_tpch_orders](4000) <> 5 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS (5))
    -- replace mode: gives way to batch 2026-04-05: partition 6 (keys 4001..5000, 100 rows). The partition numbers
    -- are the catalog's as read for this commit (no MERGE or SPLIT ran before); the check
    -- stops the commit if the function changed since. TRUNCATE ... WITH (PARTITIONS) (2016+)
    -- needs every index aligned; it deallocates the partition's pages (deferred for large ones).
    IF $PARTITION.[pf_tpch_orders](5000) <> 6 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS (6))
    -- replace mode: gives way to batch 2026-04-05: partition 7 (keys 5001..6000, 100 rows). The partition numbers
    -- are the catalog's as read for this commit (no MERGE or SPLIT ran before); the check
    -- stops the commit if the function changed since. TRUNCATE ... WITH (PARTITIONS) (2016+)
    -- needs every index aligned; it deallocates the partition's pages (deferred for large ones).
    IF $PARTITION.[pf_tpch_orders](6000) <> 7 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS (7))
    -- replace mode: gives way to batch 2026-04-05: partition 8 (keys 6001..7000, 100 rows). The partition numbers
    -- are the catalog's as read for this commit (no MERGE or SPLIT ran before); the check
    -- stops the commit if the function changed since. TRUNCATE ... WITH (PARTITIONS) (2016+)
    -- needs every index aligned; it deallocates the partition's pages (deferred for large ones).
    IF $PARTITION.[pf_tpch_orders](7000) <> 8 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS (8))
    -- replace mode: gives way to batch 2026-04-05: partition 9 (keys 7001..8000, 100 rows). The partition numbers
    -- are the catalog's as read for this commit (no MERGE or SPLIT ran before); the check
    -- stops the commit if the function changed since. TRUNCATE ... WITH (PARTITIONS) (2016+)
    -- needs every index aligned; it deallocates the partition's pages (deferred for large ones).
    IF $PARTITION.[pf_tpch_orders](8000) <> 9 THROW 51010, N'tpch.orders: its partitions changed since this commit was planned; nothing was changed', 1
    TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS (9))
    -- MERGE RANGE (1000): no partition needs this boundary any more. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](1000)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (1000) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (1000)
    -- MERGE RANGE (2000): re-split for the stream's filegroup. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](2000)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (2000) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (2000)
    -- MERGE RANGE (3000): no partition needs this boundary any more. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](3000)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (3000) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (3000)
    -- MERGE RANGE (4000): re-split for the stream's filegroup. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](4000)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (4000) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (4000)
    -- MERGE RANGE (5000): no partition needs this boundary any more. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](5000)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (5000) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (5000)
    -- MERGE RANGE (6000): re-split for the stream's filegroup. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](6000)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (6000) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (6000)
    -- MERGE RANGE (7000): no partition needs this boundary any more. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](7000)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (7000) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (7000)
    -- MERGE RANGE (8000): re-split for the stream's filegroup. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.[pf_tpch_orders](8000)
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN (@partition, @partition + 1)) THROW 51014, N'tpch.orders: the two partitions MERGE RANGE (8000) joins held rows, though read empty; nothing was changed', 1
    ALTER PARTITION FUNCTION [pf_tpch_orders]() MERGE RANGE (8000)
    -- SPLIT RANGE (2000): closes stream 1's partition. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN ($PARTITION.[pf_tpch_orders](2000))) THROW 51014, N'tpch.orders: the partition SPLIT RANGE (2000) divides held rows, though read empty; nothing was changed', 1
    ALTER PARTITION SCHEME [ps_tpch_orders] NEXT USED [fg1]
    ALTER PARTITION FUNCTION [pf_tpch_orders]() SPLIT RANGE (2000)
    -- SPLIT RANGE (4000): closes stream 2's partition. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN ($PARTITION.[pf_tpch_orders](4000))) THROW 51014, N'tpch.orders: the partition SPLIT RANGE (4000) divides held rows, though read empty; nothing was changed', 1
    ALTER PARTITION SCHEME [ps_tpch_orders] NEXT USED [fg2]
    ALTER PARTITION FUNCTION [pf_tpch_orders]() SPLIT RANGE (4000)
    -- SPLIT RANGE (6000): closes stream 3's partition. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN ($PARTITION.[pf_tpch_orders](6000))) THROW 51014, N'tpch.orders: the partition SPLIT RANGE (6000) divides held rows, though read empty; nothing was changed', 1
    ALTER PARTITION SCHEME [ps_tpch_orders] NEXT USED [fg3]
    ALTER PARTITION FUNCTION [pf_tpch_orders]() SPLIT RANGE (6000)
    -- SPLIT RANGE (8000): closes stream 4's partition. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_orders]([o_orderkey]) IN ($PARTITION.[pf_tpch_orders](8000))) THROW 51014, N'tpch.orders: the partition SPLIT RANGE (8000) divides held rows, though read empty; nothing was changed', 1
    ALTER PARTITION SCHEME [ps_tpch_orders] NEXT USED [fg4]
    ALTER PARTITION FUNCTION [pf_tpch_orders]() SPLIT RANGE (8000)
    -- Stream 1 (keys 1..2000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg1 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](2000)
    ALTER TABLE [tpch_staging].[orders_1] SWITCH TO [tpch].[orders] PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_1]
    -- Stream 2 (keys 2001..4000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg2 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](4000)
    ALTER TABLE [tpch_staging].[orders_2] SWITCH TO [tpch].[orders] PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_2]
    -- Stream 3 (keys 4001..6000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg3 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](6000)
    ALTER TABLE [tpch_staging].[orders_3] SWITCH TO [tpch].[orders] PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_3]
    -- Stream 4 (keys 6001..8000): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup fg4 with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.[pf_tpch_orders](8000)
    ALTER TABLE [tpch_staging].[orders_4] SWITCH TO [tpch].[orders] PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE [tpch_staging].[orders_4]
    -- The batch each partition holds, for the next batch's pre-flight; this run's plan is done.
    DELETE FROM [switchyard].[partition_batches] WHERE target_schema = N'tpch' AND table_name = N'orders'
    INSERT INTO [switchyard].[partition_batches] (target_schema, table_name, key_min, key_max, batch, run, rows_planned, switched_at)
    VALUES
        (N'tpch', N'orders', N'1', N'2000', N'2026-04-05', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'2001', N'4000', N'2026-04-05', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'4001', N'6000', N'2026-04-05', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'6001', N'8000', N'2026-04-05', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME())
    DELETE FROM [switchyard].[planned_partitions] WHERE target_schema = N'tpch' AND table_name = N'orders'
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;
GO

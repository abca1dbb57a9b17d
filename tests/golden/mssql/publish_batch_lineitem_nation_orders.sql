-- tpch: batch 2026-04-05 goes in whole: lineitem, orders, nation, every table in one
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
        [n_nationkey] int NOT NULL,
        [n_name] char(25) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [n_regionkey] int NOT NULL,
        [n_comment] varchar(152) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL
    ) ON [PRIMARY]

    -- tpch.lineitem (append mode): its steps, as its own commit runs them, from its window planned now.
    -- The table's Sch-M lock first, at low priority: the steps after this one would ask for it at
    -- normal priority, and new readers queue behind such a request. Partition 1 (keys up to 6000) is
    -- empty: switched out to [tpch_staging].[lineitem__lock], an empty table made to the target's shape on
    -- the partition's filegroup fg_edge, then dropped. No row and no partition changes; the
    -- transaction keeps the lock to its COMMIT.
    -- The target's columns as the catalog has them (names, types, lengths, collation,
    -- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
    -- compression: SWITCH needs both equal to the partition's.
    CREATE TABLE [tpch_staging].[lineitem__lock] (
        [l_orderkey] bigint NOT NULL,
        [l_partkey] bigint NOT NULL,
        [l_suppkey] bigint NOT NULL,
        [l_linenumber] int NOT NULL,
        [l_quantity] money NOT NULL,
        [l_extendedprice] money NOT NULL,
        [l_discount] money NOT NULL,
        [l_tax] money NOT NULL,
        [l_returnflag] char(1) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [l_linestatus] char(1) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [l_shipdate] date NOT NULL,
        [l_commitdate] date NOT NULL,
        [l_receiptdate] date NOT NULL,
        [l_shipinstruct] char(25) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [l_shipmode] char(10) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
        [l_comment] varchar(44) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL
    ) ON [fg_edge]
    SET @partition = $PARTITION.[pf_tpch_lineitem](6000)
    IF @partition <> 1 THROW 51010, N'tpch.lineitem: its partitions changed since this commit was planned; nothing was changed', 1
    ALTER TABLE [tpch].[lineitem] SWITCH PARTITION @partition TO [tpch_staging].[lineitem__lock]
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- The partition was read empty before this transaction, from sys.partitions, whose row
    -- counts are approximate (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-partitions-transact-sql),
    -- and rows may have come since: the probe is dropped only if it is empty. Otherwise the
    -- commit stops and rolls back (the rows switch back); the task's retry reads the catalog again.
    IF EXISTS (SELECT 1 FROM [tpch_staging].[lineitem__lock]) THROW 51013, N'tpch.lineitem: partition 1 held rows when this commit took its lock, though read empty; nothing was changed', 1
    DROP TABLE [tpch_staging].[lineitem__lock]
    -- SPLIT RANGE (9000): closes stream 1's partition. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    IF EXISTS (SELECT 1 FROM [tpch].[lineitem] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_lineitem]([l_orderkey]) IN ($PARTITION.[pf_tpch_lineitem](9000))) THROW 51014, N'tpch.lineitem: the partition SPLIT RANGE (9000) divides held rows, though read empty; nothing was changed', 1
    ALTER PARTITION SCHEME [ps_tpch_lineitem] NEXT USED [fg1]
    ALTER PARTITION FUNCTION [pf_tpch_lineitem]() SPLIT RANGE (9000)
    -- SPLIT RANGE (10000): closes stream 2's partition. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    IF EXISTS (SELECT 1 FROM [tpch].[lineitem] WITH (HOLDLOCK) WHERE $PARTITION.[pf_tpch_lineitem]([l_orderkey]) IN ($PARTITION.[pf_tpch_lineitem](10000))) THROW 51014, N'tpch.lineitem: the partition SPLIT RANGE (10000) divides held rows, though read empty; nothing was changed', 1
    ALTER PARTITION SCHEME [ps_tpch_lineitem] NEXT USED [fg2]
    ALTER PARTITION FUNCTION [pf_tpch_lineitem]() SPLIT RANGE (10000)
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
        (N'tpch', N'lineitem', N'8001', N'9000', N'2026-04-05', N'switchyard_tpch/run-2', 400, SYSUTCDATETIME()),
        (N'tpch', N'lineitem', N'9001', N'10000', N'2026-04-05', N'switchyard_tpch/run-2', 400, SYSUTCDATETIME())
    DELETE FROM [switchyard].[planned_partitions] WHERE target_schema = N'tpch' AND table_name = N'lineitem'
    -- tpch.orders (replace mode): its steps, as its own commit runs them, from its window planned now.
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
        (N'tpch', N'orders', N'1', N'2000', N'2026-04-05', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'2001', N'4000', N'2026-04-05', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'4001', N'6000', N'2026-04-05', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME()),
        (N'tpch', N'orders', N'6001', N'8000', N'2026-04-05', N'switchyard_tpch/run-2', 100, SYSUTCDATETIME())
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
    VALUES (N'tpch', N'nation', N'', N'', N'2026-04-05', N'switchyard_tpch/run-2', 25, SYSUTCDATETIME())
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;
GO

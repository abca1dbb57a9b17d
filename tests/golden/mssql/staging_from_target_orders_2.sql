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
    [o_orderstatus] char(1) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
    [o_totalprice] money NOT NULL,
    [o_orderdate] date NOT NULL,
    [o_orderpriority] char(15) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
    [o_clerk] char(15) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL,
    [o_shippriority] int NOT NULL,
    [o_comment] varchar(79) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL
) ON [fg2];
GO
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one. IS NOT NULL: with it SWITCH can
-- prove every row belongs to a partition other than the first even when the target's key
-- column allows NULL (NULL sorts into the first partition; Msg 4982 otherwise).
ALTER TABLE [tpch_staging].[orders_2] WITH CHECK
    ADD CONSTRAINT [orders_2_range] CHECK ([o_orderkey] IS NOT NULL AND [o_orderkey] >= 4001 AND [o_orderkey] <= 8000);
GO
-- orders_2: the target's indexes on the validated staging table, before its switch
-- (each stream builds its own, in parallel, outside the table's commit).
-- The target's indexes, each with its columns, order and data compression, on the partition's
-- filegroup: SWITCH needs the same clustered index and every index of the target on the
-- source, aligned with the partition; built here, before the commit, they are attached as
-- they are (metadata only). A primary key or unique constraint is made as a constraint.
-- SORT_IN_TEMPDB = ON: the build's sort runs in tempdb, so the stream's filegroup needs room
-- for the finished index only, not also for its sort runs
-- (https://learn.microsoft.com/en-us/sql/relational-databases/indexes/sort-in-tempdb-option-for-indexes).
-- MAXDOP = 1 (an index option of CREATE INDEX and of ALTER TABLE ... ADD CONSTRAINT):
-- the build's plan uses at most that many schedulers; 1 suppresses its parallel plan. The
-- other streams' bulk loads keep the other schedulers busy, one each.
ALTER TABLE [tpch_staging].[orders_2] ADD CONSTRAINT [orders_2__PK_orders] PRIMARY KEY CLUSTERED ([o_orderkey]) WITH (DATA_COMPRESSION = PAGE, SORT_IN_TEMPDB = ON, MAXDOP = 1) ON [fg2];
GO
CREATE NONCLUSTERED INDEX [IX_orders_cust_date] ON [tpch_staging].[orders_2] ([o_custkey], [o_orderdate] DESC) INCLUDE ([o_totalprice]) WITH (DATA_COMPRESSION = PAGE, SORT_IN_TEMPDB = ON, MAXDOP = 1) ON [fg2];
GO

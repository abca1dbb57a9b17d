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
-- The target's own CHECK constraints, as its catalog defines them: SWITCH needs the staging
-- table to carry each of them, trusted (added WITH CHECK on the empty table; the load checks
-- every row against them).
ALTER TABLE [tpch_staging].[orders_2] WITH CHECK
    ADD CONSTRAINT [orders_2__CK_orders_price] CHECK ([o_totalprice]>=(0));
GO
ALTER TABLE [tpch_staging].[orders_2] WITH CHECK
    ADD CONSTRAINT [orders_2__CK_orders_status] CHECK ([o_orderstatus]='P' OR [o_orderstatus]='O' OR [o_orderstatus]='F');
GO

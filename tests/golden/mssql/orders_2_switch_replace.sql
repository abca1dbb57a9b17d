-- The partition's current rows go to an empty table on the same filegroup (SWITCH out
-- needs an empty target there), so the switch in finds an empty partition.
DROP TABLE IF EXISTS [tpch_staging].[orders_2_old];
GO
CREATE TABLE [tpch_staging].[orders_2_old] (
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
-- One batch, one transaction (XACT_ABORT rolls back on any error): readers see the old
-- partition or the new one, never neither. The partition number is looked up by
-- $PARTITION at run time, so it is right after any SPLIT. WAIT_AT_LOW_PRIORITY (2014+)
-- queues the schema-modification lock behind readers for at most MAX_DURATION minutes,
-- then gives up (ABORT_AFTER_WAIT = SELF) instead of blocking every new reader.
SET XACT_ABORT ON
DECLARE @partition int = $PARTITION.[pf_orders](20001)
BEGIN TRY
    BEGIN TRANSACTION
    ALTER TABLE [tpch].[orders] SWITCH PARTITION @partition TO [tpch_staging].[orders_2_old]
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    ALTER TABLE [tpch_staging].[orders_2] SWITCH TO [tpch].[orders] PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional in SQL Server, so the drops commit with the switch: a
    -- staging table exists exactly while its rows are not switched in. Were they dropped
    -- after COMMIT, a task killed in between would leave an empty staging table behind, and
    -- its retry would switch the new partition out and that empty table in. The staging
    -- table is empty now (metadata only); the old partition's pages are freed after COMMIT
    -- (deferred drop for large tables).
    DROP TABLE [tpch_staging].[orders_2]
    DROP TABLE [tpch_staging].[orders_2_old]
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;
GO

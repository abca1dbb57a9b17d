-- publish: batch. The validated staging table of an unpartitioned table becomes the table's
-- next version, {{ qn(staging_schema, next_table) }}: the batch's publish (publish_batch.sql)
-- replaces the table's rows with it, together with every other table of the batch, in one
-- transaction. Nothing here touches {{ qn(schema, s.table) }}: its readers never wait for this
-- step. A next version an earlier run left behind is replaced. One transaction (XACT_ABORT: any
-- error rolls all of it back), so a retry finds either the staging table or the next version,
-- never neither.
SET XACT_ABORT ON
BEGIN TRY
    BEGIN TRANSACTION
    DROP TABLE IF EXISTS {{ qn(staging_schema, next_table) }}
    -- sp_rename changes the name only: the table stays in its schema with its rows, and the new
    -- name is one part (https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sp-rename-transact-sql).
    -- It runs inside the transaction and is rolled back with it.
    EXEC sys.sp_rename @objname = {{ nstr(qn(staging_schema, s.staging_table)) }}, @newname = {{ nstr(next_table) }}, @objtype = N'OBJECT'
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;

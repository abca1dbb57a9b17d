-- Small unpartitioned tables are replaced whole, in one transaction (XACT_ABORT rolls back
-- on any error). TRUNCATE TABLE asks for a Sch-M lock at normal priority, and readers that
-- come after the request queue behind it: a short LOCK_TIMEOUT bounds that queue, and the
-- adapter runs the transaction again after a pause (commit_table.sql says why;
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/set-lock-timeout-transact-sql). The
-- lock is then held while the table's rows are copied in (a small table: seconds at most).
SET LOCK_TIMEOUT {{ lit(commit_lock_wait_ms) }};
SET XACT_ABORT ON
BEGIN TRY
    BEGIN TRANSACTION
    TRUNCATE TABLE {{ qn(schema, s.table) }}
    INSERT INTO {{ qn(schema, s.table) }} WITH (TABLOCK) ({% for c in columns %}{{ q(c.name) }}{{ ", " if not loop.last }}{% endfor %})
        SELECT {% for c in columns %}{{ q(c.name) }}{{ ", " if not loop.last }}{% endfor %} FROM {{ qn(staging_schema, s.staging_table) }}
    -- DROP TABLE is transactional: the staging table goes with the commit that used it.
    DROP TABLE {{ qn(staging_schema, s.staging_table) }}
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;

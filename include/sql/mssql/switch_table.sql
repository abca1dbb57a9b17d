-- Small unpartitioned tables are replaced whole, in one transaction (XACT_ABORT rolls back
-- on any error); LOCK_TIMEOUT bounds the wait for readers.
SET LOCK_TIMEOUT {{ lit(lock_timeout_seconds * 1000) }};
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

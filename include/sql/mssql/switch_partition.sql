{% if replace_existing %}
-- The partition's current rows go to an empty table on the same filegroup (SWITCH out
-- needs an empty target there), so the switch in finds an empty partition.
DROP TABLE IF EXISTS {{ qn(staging_schema, old_table) }};
CREATE TABLE {{ qn(staging_schema, old_table) }} (
{% for c in columns %}
    {{ q(c.name) }} {{ c.type }} {{ "NULL" if c.nullable else "NOT NULL" }}{{ "," if not loop.last }}
{% endfor %}
) ON {{ q(s.filegroup) }};
{% endif %}
-- One batch, one transaction (XACT_ABORT rolls back on any error): readers see the old
-- partition or the new one, never neither. The partition number is looked up by
-- $PARTITION at run time, so it is right after any SPLIT. WAIT_AT_LOW_PRIORITY (2014+)
-- queues the schema-modification lock behind readers for at most MAX_DURATION minutes,
-- then gives up (ABORT_AFTER_WAIT = SELF) instead of blocking every new reader.
SET XACT_ABORT ON
DECLARE @partition int = $PARTITION.{{ q(function) }}({{ lower_sql }})
BEGIN TRY
    BEGIN TRANSACTION
{% if replace_existing %}
    ALTER TABLE {{ qn(schema, s.table) }} SWITCH PARTITION @partition TO {{ qn(staging_schema, old_table) }}
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = {{ lit(wait_minutes) }} MINUTES, ABORT_AFTER_WAIT = SELF))
{% endif %}
    ALTER TABLE {{ qn(staging_schema, s.staging_table) }} SWITCH TO {{ qn(schema, s.table) }} PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = {{ lit(wait_minutes) }} MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional in SQL Server, so the drops commit with the switch: a
    -- staging table exists exactly while its rows are not switched in. Were they dropped
    -- after COMMIT, a task killed in between would leave an empty staging table behind, and
    -- its retry would switch the new partition out and that empty table in. The staging
    -- table is empty now (metadata only); the old partition's pages are freed after COMMIT
    -- (deferred drop for large tables).
    DROP TABLE {{ qn(staging_schema, s.staging_table) }}
{% if replace_existing %}
    DROP TABLE {{ qn(staging_schema, old_table) }}
{% endif %}
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;

{% import "_identity.sql" as identity with context %}
{% import "_swap_steps.sql" as swaps with context %}
{% if swap %}
-- A small unpartitioned table is replaced whole, in one transaction (XACT_ABORT rolls back on
-- any error): its staging table, made to its shape, is switched in (metadata only). The first
-- SWITCH takes the table's Sch-M lock at low priority, so readers never queue behind the
-- request, and the lock is held for catalog changes only, never while rows are copied. The
-- short LOCK_TIMEOUT bounds the later requests (the staging tables'); the adapter runs the
-- transaction again after a pause (commit_table.sql says why;
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/set-lock-timeout-transact-sql).
{% else %}
-- A small unpartitioned table is replaced whole, in one transaction (XACT_ABORT rolls back
-- on any error), by TRUNCATE TABLE and INSERT ... SELECT: the pre-flight said why it cannot
-- take its staging table by SWITCH. TRUNCATE TABLE asks for a Sch-M lock at normal priority,
-- and readers that come after the request queue behind it: a short LOCK_TIMEOUT bounds that
-- queue, and the adapter runs the transaction again after a pause (commit_table.sql says why;
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/set-lock-timeout-transact-sql). The
-- lock is then held while the table's rows are copied in (a small table: seconds at most).
{% endif %}
-- In a deadlock with a reader this transaction is the one SQL Server rolls back (the session
-- of lower DEADLOCK_PRIORITY is the victim,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/set-deadlock-priority-transact-sql):
-- the reader's query goes on, and the adapter runs the transaction again (error 1205).
SET LOCK_TIMEOUT {{ lit(commit_lock_wait_ms) }};
SET DEADLOCK_PRIORITY LOW;
SET XACT_ABORT ON
BEGIN TRY
    BEGIN TRANSACTION
{% if swap %}
{{ swaps.make_old(swap) }}
{{ swaps.swap_in(swap, qn(staging_schema, s.staging_table), s.table, wait_minutes) }}
{% else %}
{% with table_name=s.table, source=qn(staging_schema, s.staging_table), rows=none %}
{% include "_replace_steps.sql" %}
{% endwith %}
{% endif %}
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
{% if not swap %}
    {{ identity.identity_insert(qn(schema, s.table), "OFF") }}
{% endif %}
    ;THROW
END CATCH;

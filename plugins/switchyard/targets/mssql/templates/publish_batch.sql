{% import "_identity.sql" as identity with context %}
{% import "_swap_steps.sql" as swaps with context %}
-- {{ schema }}: batch {{ batch }} goes in whole: {{ tables | map(attribute="table_name") | join(", ") }}, every table in one
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
-- under a short LOCK_TIMEOUT ({{ commit_lock_wait_ms }} ms per lock request,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/set-lock-timeout-transact-sql): a
-- normal-priority request behind a long reader of any table gives up after that long (error
-- 1222), the whole transaction rolls back (nothing changed; the locks it held are released), the
-- readers it held up go on, and the adapter runs the publish again after a pause
-- ({{ commit_attempts }} attempts in all). The tables are taken in that order, every publish alike.
-- What readers wait: a reader of a table taken early waits for the rest of the transaction, that
-- is the later tables' lock requests (each at most {{ commit_lock_wait_ms }} ms), their catalog changes, and
-- the copy of the rows of any unpartitioned table replaced by TRUNCATE TABLE and INSERT. Worst
-- case per attempt: {{ tables | length }} x {{ commit_lock_wait_ms }} ms of lock requests plus the transaction's own work.
-- A later table whose first step is a SWITCH (append mode with nothing to empty or retire, a
-- new table, an unpartitioned table switched in whole) asks at normal priority too: at low
-- priority (WAIT_AT_LOW_PRIORITY, MAX_DURATION = {{ wait_minutes }} MINUTES,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql#wait_at_low_priority)
-- its own readers would not queue behind the request, but the tables taken before it would
-- stay taken while it waited, up to that long.
-- In a deadlock with a reader this transaction is the one SQL Server rolls back (the session
-- of lower DEADLOCK_PRIORITY is the victim,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/set-deadlock-priority-transact-sql):
-- the reader's query goes on, and the adapter runs the whole transaction again (error 1205).
SET XACT_ABORT ON
SET LOCK_TIMEOUT {{ lit(commit_lock_wait_ms) }}
SET DEADLOCK_PRIORITY LOW
DECLARE @partition int
BEGIN TRY
    BEGIN TRANSACTION
{% for t in tables if not t.partitioned and t.swap and t.rows is not none %}
{% if loop.first %}
    -- The next versions of the tables switched in whole, counted before any table is taken: an
    -- exclusive table lock held to COMMIT (TABLOCKX, HOLDLOCK) keeps each as counted. Validation
    -- counted them; another count now means one changed since.
{% endif %}
    IF (SELECT COUNT_BIG(*) FROM {{ t.source }} WITH (TABLOCKX, HOLDLOCK)) <> {{ lit(t.rows) }} THROW 51012, N'{{ t.table }}: the rows to publish are not the {{ "{:,}".format(t.rows) }} the manifest says; nothing was published', 1
{% endfor %}
{% for t in tables if not t.partitioned and t.swap %}
{{ swaps.make_old(t.swap) }}
{% endfor %}
{% for t in tables %}
{% if t.partitioned %}
    -- {{ t.table }} ({{ t.mode }} mode): its steps, as its own commit runs them, from its window planned now.
{% with table=t.table, table_name=t.table_name, mode=t.mode, steps=t.steps, function=t.function, scheme=t.scheme, schemes=t.schemes, key_column=t.key_column, columns=t.columns, indexes=t.indexes, records=t.records, gone=t.gone, low_priority=t.low_priority %}
{% include "_commit_steps.sql" %}
{% endwith %}
{% elif t.swap %}
    -- {{ t.table }} (unpartitioned, replaced whole): its next version switched in. SWITCH keeps the
    -- table itself (its grants, the views on it).
{{ swaps.swap_in(t.swap, t.source, t.table_name, wait_minutes) }}
{% else %}
    -- {{ t.table }} (unpartitioned, replaced whole): its rows replaced by its next version's. TRUNCATE
    -- TABLE and INSERT keep the table itself (its grants, the views on it); the table's Sch-M is
    -- held while its rows are copied (the pre-flight said why it cannot take its next version by
    -- SWITCH).
{% with table_name=t.table_name, columns=t.columns, source=t.source, rows=t.rows %}
{% include "_replace_steps.sql" %}
{% endwith %}
{% endif %}
{% if not t.partitioned %}
    -- The batch the table holds, one row for the whole table (no key range).
    DELETE FROM {{ qn(control_schema, "partition_batches") }} WHERE target_schema = {{ nstr(schema) }} AND table_name = {{ nstr(t.table_name) }}
    INSERT INTO {{ qn(control_schema, "partition_batches") }} (target_schema, table_name, key_min, key_max, batch, run, rows_planned, switched_at)
    VALUES ({{ nstr(schema) }}, {{ nstr(t.table_name) }}, N'', N'', {{ nstr(batch) }}, {{ nstr(run) }}, {{ lit(t.rows) if t.rows is not none else "NULL" }}, SYSUTCDATETIME())
{% endif %}
{% endfor %}
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
{% for t in tables if not t.partitioned and not t.swap %}
    {{ identity.identity_insert(qn(schema, t.table_name), "OFF") }}
{% endfor %}
    ;THROW
END CATCH;

{% import "_shape.sql" as shape with context %}
-- {{ table }}: batch {{ batch }} goes in whole ({{ mode }} mode), in one transaction run by the
-- table's last switch once every stream of the batch is validated and staged. Readers see the
-- table before the batch or after it, never a mix: every statement below is part of one
-- transaction (XACT_ABORT: any error rolls all of it back, and the table stays as it was).
-- Locks. SWITCH, TRUNCATE and ALTER PARTITION FUNCTION take a schema-modification (Sch-M)
-- lock on the table (ALTER PARTITION FUNCTION on every table and index on the function), held
-- to COMMIT. Sch-M is compatible with no other lock, not even the Sch-S of a reader under READ
-- UNCOMMITTED or snapshot isolation, and a request that waits for it blocks every request for
-- the table that comes after it: readers queue behind the commit's waiting request, not only
-- behind its granted lock
-- (https://learn.microsoft.com/en-us/sql/relational-databases/sql-server-transaction-locking-and-row-versioning-guide#lock_compatibility).
-- Only SWITCH can wait at low priority, out of that queue (WAIT_AT_LOW_PRIORITY,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql#wait_at_low_priority);
-- TRUNCATE TABLE ... WITH (PARTITIONS) and ALTER PARTITION FUNCTION ... SPLIT / MERGE ask at
-- normal priority. So the whole transaction runs under a short LOCK_TIMEOUT
-- ({{ commit_lock_wait_ms }} ms, https://learn.microsoft.com/en-us/sql/t-sql/statements/set-lock-timeout-transact-sql):
-- a normal-priority request behind a long reader gives up after that long (error 1222), the
-- transaction rolls back whole (nothing changed), the queue it held up moves on, and the
-- adapter runs the commit again after a pause ({{ commit_attempts }} attempts in all). Once
-- the first Sch-M is granted the table is this transaction's: the later steps on it do not
-- wait for readers again, and every step is metadata only (empty partitions), so readers
-- wait for the catalog changes alone. The worst a new reader waits: {{ commit_lock_wait_ms }} ms
-- per attempt while a request is queued, plus the transaction's own catalog work.
SET XACT_ABORT ON
SET LOCK_TIMEOUT {{ lit(commit_lock_wait_ms) }}
DECLARE @partition int
BEGIN TRY
    BEGIN TRANSACTION
{% for st in steps %}
{% if st.kind == "truncate" %}
    -- {{ st.why }}: partition {{ st.number }} ({{ st.range }}, {{ "{:,}".format(st.rows) }} rows). The partition numbers
    -- are the catalog's as read for this commit (no MERGE or SPLIT ran before); the check
    -- stops the commit if the function changed since. TRUNCATE ... WITH (PARTITIONS) (2016+)
    -- needs every index aligned; it deallocates the partition's pages (deferred for large ones).
    IF $PARTITION.{{ qc(function) }}({{ st.value_sql }}) <> {{ lit(st.number) }} THROW 51010, N'{{ table }}: its partitions changed since this commit was planned; nothing was changed', 1
    TRUNCATE TABLE {{ qn(schema, table_name) }} WITH (PARTITIONS ({{ lit(st.number) }}))
{% elif st.kind == "archive" %}
    -- {{ st.why }}: partition {{ st.number }} ({{ st.range }}, {{ "{:,}".format(st.rows) }} rows) switched out to
    -- {{ st.archive }}, an empty table made to the target's shape on the partition's filegroup
    -- {{ st.filegroup }} (SWITCH out needs an empty target on the same filegroup).
    {{ shape.create_table(st.archive, columns, st.filegroup, st.heap_compression, end="") | indent(4) }}
    {{ shape.create_indexes(st.archive, indexes, st.filegroup, st.compression, st.constraint_names, end="") | indent(4) }}
    SET @partition = $PARTITION.{{ qc(function) }}({{ st.value_sql }})
    IF @partition <> {{ lit(st.number) }} THROW 51010, N'{{ table }}: its partitions changed since this commit was planned; nothing was changed', 1
    ALTER TABLE {{ qn(schema, table_name) }} SWITCH PARTITION @partition TO {{ st.archive }}
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = {{ lit(wait_minutes) }} MINUTES, ABORT_AFTER_WAIT = SELF))
{% elif st.kind == "merge" %}
    -- MERGE RANGE ({{ st.range_sql }}): {{ st.why }}. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    ALTER PARTITION FUNCTION {{ qc(function) }}() MERGE RANGE ({{ st.range_sql }})
{% elif st.kind == "split" %}
    -- SPLIT RANGE ({{ st.range_sql }}): {{ st.why }}. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    ALTER PARTITION SCHEME {{ qc(scheme) }} NEXT USED {{ qc(st.filegroup) }}
    ALTER PARTITION FUNCTION {{ qc(function) }}() SPLIT RANGE ({{ st.range_sql }})
{% elif st.kind == "switch_in" %}
    -- Stream {{ st.stream }} ({{ st.range }}): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup {{ st.filegroup }} with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.{{ qc(function) }}({{ st.value_sql }})
    ALTER TABLE {{ st.staging }} SWITCH TO {{ qn(schema, table_name) }} PARTITION @partition
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = {{ lit(wait_minutes) }} MINUTES, ABORT_AFTER_WAIT = SELF))
    -- DROP TABLE is transactional: the (now empty) staging table goes with this commit.
    DROP TABLE {{ st.staging }}
{% endif %}
{% endfor %}
    -- The batch each partition holds, for the next batch's pre-flight; this run's plan is done.
{% if mode == "replace" %}
    DELETE FROM {{ qn(control_schema, "partition_batches") }} WHERE target_schema = {{ nstr(schema) }} AND table_name = {{ nstr(table_name) }}
{% elif gone %}
    DELETE FROM {{ qn(control_schema, "partition_batches") }} WHERE target_schema = {{ nstr(schema) }} AND table_name = {{ nstr(table_name) }}
        AND key_max IN ({% for k in gone %}{{ nstr(k) }}{{ ", " if not loop.last }}{% endfor %})
{% endif %}
    INSERT INTO {{ qn(control_schema, "partition_batches") }} (target_schema, table_name, key_min, key_max, batch, run, rows_planned, switched_at)
    VALUES
{% for r in records %}
        ({{ nstr(schema) }}, {{ nstr(table_name) }}, {{ nstr(r.key_min) }}, {{ nstr(r.key_max) }}, {{ nstr(batch) }}, {{ nstr(run) }}, {{ lit(r.rows) if r.rows is not none else "NULL" }}, SYSUTCDATETIME()){{ "," if not loop.last }}
{% endfor %}
    DELETE FROM {{ qn(control_schema, "planned_partitions") }} WHERE target_schema = {{ nstr(schema) }} AND table_name = {{ nstr(table_name) }}
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;

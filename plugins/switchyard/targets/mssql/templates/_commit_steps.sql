{#- A partitioned table's commit steps, in the caller's transaction: commit_table.sql (the
    table's own commit, publish: table) and publish_batch.sql (every table of the batch in one
    transaction) include them. Context: table, table_name, mode, batch, run, steps, function,
    scheme, key_column, columns, indexes, records, gone, wait_minutes, low_priority (the transaction's first
    table: its SWITCHes wait at low priority; a later table's at normal priority, under the
    caller's short LOCK_TIMEOUT, so that the tables taken before it are not held for minutes);
    @partition is declared by the caller. -#}
{% import "_shape.sql" as shape with context %}
{#- The SWITCH's low-priority wait, on its own line after the statement, for the first table only. -#}
{% macro low_priority_wait() -%}
{{ ("\n        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = " ~ lit(wait_minutes) ~ " MINUTES, ABORT_AFTER_WAIT = SELF))") if low_priority else "" }}
{%- endmacro %}
{#- Partition st.number switched out, at low priority, to `into`: an empty table made to the
    target's shape on the partition's filegroup (SWITCH out needs an empty target there). -#}
{% macro switch_out(into, st) %}
    {{ shape.create_table(into, columns, st.filegroup, st.heap_compression, end="") | indent(4) }}
{% if indexes %}
    {{ shape.create_indexes(into, indexes, st.filegroup, st.compression, st.constraint_names, end="") | indent(4) }}
{% endif %}
    SET @partition = $PARTITION.{{ qc(function) }}({{ st.value_sql }})
    IF @partition <> {{ lit(st.number) }} THROW 51010, N'{{ table }}: its partitions changed since this commit was planned; nothing was changed', 1
    ALTER TABLE {{ qn(schema, table_name) }} SWITCH PARTITION @partition TO {{ into }}{{ low_priority_wait() }}
{%- endmacro %}
{#- The partitions a MERGE or SPLIT touches, read again in the transaction: the window was planned
    from sys.partitions' approximate counts before it, and a MERGE or SPLIT of a partition with
    rows moves them (fully logged, each row, under the Sch-M every reader of the table waits for)
    instead of changing metadata only. HOLDLOCK keeps what it read to COMMIT (serializable, no
    row enters the range before the ALTER's own Sch-M); the table is most often this
    transaction's already (the lock step, or a SWITCH before). $PARTITION in the WHERE clause reads
    the named partitions only
    (https://learn.microsoft.com/en-us/sql/t-sql/functions/partition-transact-sql). Rows there stop
    the commit, rolled back whole; the task's retry reads the catalog again. -#}
{% macro still_empty(partitions, what) -%}
IF EXISTS (SELECT 1 FROM {{ qn(schema, table_name) }} WITH (HOLDLOCK) WHERE $PARTITION.{{ qc(function) }}({{ qc(key_column) }}) IN ({{ partitions }})) THROW 51014, N'{{ table }}: {{ what | replace("'", "''") }} held rows, though read empty; nothing was changed', 1
{%- endmacro %}
{% for st in steps %}
{% if st.kind == "lock" %}
    -- The table's Sch-M lock first, at low priority: the steps after this one would ask for it at
    -- normal priority, and new readers queue behind such a request. Partition {{ st.number }} ({{ st.range }}) is
    -- empty: switched out to {{ st.probe }}, an empty table made to the target's shape on
    -- the partition's filegroup {{ st.filegroup }}, then dropped. No row and no partition changes; the
    -- transaction keeps the lock to its COMMIT.
{{ switch_out(st.probe, st) }}
    -- The partition was read empty before this transaction, from sys.partitions, whose row
    -- counts are approximate (https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-partitions-transact-sql),
    -- and rows may have come since: the probe is dropped only if it is empty. Otherwise the
    -- commit stops and rolls back (the rows switch back); the task's retry reads the catalog again.
    IF EXISTS (SELECT 1 FROM {{ st.probe }}) THROW 51013, N'{{ table }}: partition {{ st.number }} held rows when this commit took its lock, though read empty; nothing was changed', 1
    DROP TABLE {{ st.probe }}
{% elif st.kind == "truncate" %}
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
{{ switch_out(st.archive, st) }}
{% elif st.kind == "merge" %}
    -- MERGE RANGE ({{ st.range_sql }}): {{ st.why }}. Both partitions it joins are empty here, so it is
    -- metadata only; the merged partition stays on the filegroup of the right one.
    SET @partition = $PARTITION.{{ qc(function) }}({{ st.value_sql }})
    {{ still_empty("@partition, @partition + 1", "the two partitions MERGE RANGE (" ~ st.range_sql ~ ") joins") }}
    ALTER PARTITION FUNCTION {{ qc(function) }}() MERGE RANGE ({{ st.range_sql }})
{% elif st.kind == "split" %}
    -- SPLIT RANGE ({{ st.range_sql }}): {{ st.why }}. It lands in an empty partition (metadata only); with
    -- RANGE LEFT the new partition is the one left of the value, on the NEXT USED filegroup.
    {{ still_empty("$PARTITION." ~ qc(function) ~ "(" ~ st.value_sql ~ ")", "the partition SPLIT RANGE (" ~ st.range_sql ~ ") divides") }}
{% if schemes | length > 1 %}
    -- Every scheme of the function gets the same NEXT USED filegroup: SPLIT fails if one has
    -- none, and the table's indexes on the other schemes keep their partition beside the table's.
{% endif %}
{% for name in schemes %}
    ALTER PARTITION SCHEME {{ qc(name) }} NEXT USED {{ qc(st.filegroup) }}
{% endfor %}
    ALTER PARTITION FUNCTION {{ qc(function) }}() SPLIT RANGE ({{ st.range_sql }})
{% elif st.kind == "switch_in" %}
    -- Stream {{ st.stream }} ({{ st.range }}): its staging table's trusted CHECK lies within the partition's
    -- boundaries, it is on the partition's filegroup {{ st.filegroup }} with the partition's compression
    -- and the target's indexes, and the partition is empty: SWITCH is metadata only.
    SET @partition = $PARTITION.{{ qc(function) }}({{ st.value_sql }})
    ALTER TABLE {{ st.staging }} SWITCH TO {{ qn(schema, table_name) }} PARTITION @partition{{ low_priority_wait() }}
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

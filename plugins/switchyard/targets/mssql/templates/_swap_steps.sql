{#- Macros: an unpartitioned table's rows replaced by `source`'s by SWITCH, in the caller's
    transaction: switch_table.sql (the table's own switch, publish: table) and publish_batch.sql
    (every table of the batch in one transaction) import them. `swap`: commit_sql's swap_context.
    make_old runs before the transaction takes any table (a batch's publish makes every table's
    before its first lock), swap_in where the table's turn comes. -#}
{% import "_shape.sql" as shape with context %}
{% macro make_old(swap) %}
    -- SWITCH needs an empty target: the rows of {{ swap.table }} go first to {{ swap.old }}, an empty
    -- table made to its shape on its filegroup {{ swap.filegroup }}, made here before any table is
    -- taken, so no reader waits for it.
    DROP TABLE IF EXISTS {{ swap.old }}
    {{ shape.create_table(swap.old, swap.columns, swap.filegroup, swap.heap_compression, end="") | indent(4) }}
{% if swap.indexes %}
    {{ shape.create_indexes(swap.old, swap.indexes, swap.filegroup, swap.compression, swap.constraint_names, end="") | indent(4) }}
{% endif %}
{%- endmacro %}
{% macro swap_in(swap, source, table_name, wait_minutes) %}
    -- {{ source }} was made to the table's shape (its columns, filegroup, data compression and
    -- CHECK constraints at prepare, its indexes before this step), so SWITCH moves whole tables
    -- by metadata only: no row is copied while the table is taken.
{% if swap.low_priority %}
    -- This SWITCH takes the table's Sch-M lock at low priority, out of the lock queue: new
    -- readers do not queue behind its request while it waits for the readers before it
    -- (https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql#wait_at_low_priority).
    ALTER TABLE {{ qn(schema, table_name) }} SWITCH TO {{ swap.old }}
        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = {{ lit(wait_minutes) }} MINUTES, ABORT_AFTER_WAIT = SELF))
{% else %}
    -- This SWITCH takes the table's Sch-M lock at normal priority, under the transaction's short
    -- LOCK_TIMEOUT: a low-priority wait would hold the tables taken before it.
    ALTER TABLE {{ qn(schema, table_name) }} SWITCH TO {{ swap.old }}
{% endif %}
    -- The table is empty now, and this transaction holds its lock to COMMIT: its next version
    -- goes in.
    ALTER TABLE {{ source }} SWITCH TO {{ qn(schema, table_name) }}
    -- DROP TABLE is transactional: the previous rows and the (now empty) next version go with the
    -- commit that replaced them. A large table's pages are deallocated after the COMMIT
    -- (https://learn.microsoft.com/en-us/sql/relational-databases/indexes/drop-and-rebuild-large-objects).
    DROP TABLE {{ swap.old }}
    DROP TABLE {{ source }}
{%- endmacro %}

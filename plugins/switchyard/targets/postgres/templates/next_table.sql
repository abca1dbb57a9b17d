-- The table's next version for this run: empty, partitioned like the target, with the
-- target's columns and constraints. Whatever an earlier run left in it (the staging tables
-- of a run that failed) goes: this run's groups load their own.
DROP TABLE IF EXISTS {{ qn(staging_schema, next_table) }};
CREATE TABLE {{ qn(staging_schema, next_table) }} (
    LIKE {{ qn(schema, table) }} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
) PARTITION BY RANGE ({{ q(key) }});
DELETE FROM {{ qn(control_schema, "planned_partitions") }}
WHERE target_schema = %(schema)s AND table_name = %(table)s;

-- One transaction: readers see the old partition or the new one, never neither or both.
-- lock_timeout bounds the wait for readers of the target table.
SET LOCAL lock_timeout = '{{ lock_timeout_seconds }}s';
{% if replace_existing %}
ALTER TABLE {{ qn(schema, s.table) }} DETACH PARTITION {{ qn(schema, s.partition_table) }};
DROP TABLE {{ qn(schema, s.partition_table) }};
{% endif %}
ALTER TABLE {{ qn(staging_schema, s.staging_table) }} RENAME TO {{ q(s.partition_table) }};
ALTER TABLE {{ qn(staging_schema, s.partition_table) }} SET SCHEMA {{ q(schema) }};
ALTER TABLE {{ qn(schema, s.table) }} ATTACH PARTITION {{ qn(schema, s.partition_table) }}
    FOR VALUES FROM ({{ lit(lower) }}) TO ({{ lit(upper_next) }});

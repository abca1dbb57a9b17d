-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '{{ lock_timeout_seconds }}s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE {{ qn(staging_schema, next_table) }} IN SHARE ROW EXCLUSIVE MODE;
{% if not attached %}
ALTER TABLE {{ qn(staging_schema, next_table) }} ATTACH PARTITION {{ qn(staging_schema, s.staging_table) }}
    {{ bound }};
{% endif %}

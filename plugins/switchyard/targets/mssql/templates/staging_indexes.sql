{% import "_shape.sql" as shape with context %}
-- {{ s.group_id }}: the target's indexes on the validated staging table, before its switch
-- (each stream builds its own, in parallel, outside the table's commit).
{{ shape.create_indexes(qn(staging_schema, s.staging_table), indexes, filegroup, compression, constraint_names, maxdop=maxdop if maxdop is defined else none, sort_in_tempdb=true) }}

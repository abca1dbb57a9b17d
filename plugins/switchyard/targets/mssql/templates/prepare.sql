{% import "_shape.sql" as shape with context %}
-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS {{ qn(staging_schema, s.staging_table) }};
{% if next_table %}
-- publish: batch. The table's next version an earlier attempt of this group staged (its staging
-- table, renamed by sp_rename, which renames the table and not its constraints) is dropped too:
-- its constraints carry the names this staging table's get, and a constraint's name is unique
-- in its schema (https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sp-rename-transact-sql).
DROP TABLE IF EXISTS {{ qn(staging_schema, next_table) }};
{% endif %}
-- A heap with no index, on its partition's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged; the target's indexes are built on it after validation, before
-- the switch.
{{ shape.create_table(qn(staging_schema, s.staging_table), columns, filegroup, compression) }}
{% if s.partitioned %}
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one. IS NOT NULL: with it SWITCH can
-- prove every row belongs to a partition other than the first even when the target's key
-- column allows NULL (NULL sorts into the first partition; Msg 4982 otherwise).
{% if key_kind != "integer" %}
-- Date and time literals are typed: CONVERT with style 23 (yyyy-mm-dd) or 126 (ISO 8601 with
-- the T), which SQL Server reads the same under every SET LANGUAGE and SET DATEFORMAT.
{% endif %}
ALTER TABLE {{ qn(staging_schema, s.staging_table) }} WITH CHECK
    ADD CONSTRAINT {{ q(s.staging_table ~ "_range") }} CHECK ({{ q(key) }} IS NOT NULL AND {{ q(key) }} >= {{ lower_sql }} AND {{ q(key) }} <= {{ upper_sql }});
{% endif %}
{% for c in checks %}
{% if loop.first %}
-- The target's own CHECK constraints, as its catalog defines them: SWITCH needs the staging
-- table to carry each of them, trusted (added WITH CHECK on the empty table; the load checks
-- every row against them).
{% endif %}
ALTER TABLE {{ qn(staging_schema, s.staging_table) }} WITH CHECK
    ADD CONSTRAINT {{ qc(c.name) }} CHECK {{ c.definition }};
{% endfor %}

{% import "_shape.sql" as shape with context %}
-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS {{ qn(staging_schema, s.staging_table) }};
-- A heap with no index, on its partition's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged; the target's indexes are built on it after validation, before
-- the switch.
{{ shape.create_table(qn(staging_schema, s.staging_table), columns, filegroup, compression) }}
{% if s.partitioned %}
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one.
{% if key_kind != "integer" %}
-- Date and time literals are ISO 8601 (with the T for times): SQL Server reads them the
-- same under every SET LANGUAGE and SET DATEFORMAT.
{% endif %}
ALTER TABLE {{ qn(staging_schema, s.staging_table) }} WITH CHECK
    ADD CONSTRAINT {{ q(s.staging_table ~ "_range") }} CHECK ({{ q(key) }} >= {{ lower_sql }} AND {{ q(key) }} <= {{ upper_sql }});
{% endif %}

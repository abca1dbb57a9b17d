-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS {{ qn(staging_schema, s.staging_table) }};
-- A heap with no index, on the stream's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged, and SWITCH needs the partition's filegroup and the target's
-- columns (types, nullability, order) exactly.
CREATE TABLE {{ qn(staging_schema, s.staging_table) }} (
{% for c in columns %}
    {{ q(c.name) }} {{ c.type }} {{ "NULL" if c.nullable else "NOT NULL" }}{{ "," if not loop.last }}
{% endfor %}
) ON {{ q(s.filegroup) }};
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

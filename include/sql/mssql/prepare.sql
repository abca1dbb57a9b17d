-- A failed earlier attempt's staging table is replaced, never appended to (DROP ... IF EXISTS: 2016+).
DROP TABLE IF EXISTS {{ qn(staging_schema, s.staging_table) }};
-- A heap with no index, on the stream's filegroup: BULK INSERT with TABLOCK into an empty
-- heap is minimally logged, and SWITCH needs the partition's filegroup and the target's
-- columns (types, nullability, order) exactly.
CREATE TABLE {{ qn(staging_schema, s.staging_table) }} (
{% for c in columns %}
    {{ q(c.name) }} {{ c.type }} NOT NULL{{ "," if not loop.last }}
{% endfor %}
) ON {{ q(s.filegroup) }};
{% if s.partitioned %}
-- The partition's range, inclusive at both ends. Added WITH CHECK on the empty table, so it
-- is trusted from the start; SWITCH refuses an untrusted one.
ALTER TABLE {{ qn(staging_schema, s.staging_table) }} WITH CHECK
    ADD CONSTRAINT {{ q(s.staging_table ~ "_range") }} CHECK ({{ q(key) }} >= {{ lit(s.lower) }} AND {{ q(key) }} <= {{ lit(s.upper) }});
{% endif %}

{#- Macros: a table made to the target's shape (columns, indexes, data compression), for the
    staging tables and the archive tables a partition is switched in from or out to. -#}
{% macro create_table(qname, columns, filegroup, compression, end=";") -%}
-- The target's columns as the catalog has them (names, types, lengths, collation,
-- nullability, order): SWITCH needs them equal. On the partition's filegroup, with its data
-- compression: SWITCH needs both equal to the partition's.
CREATE TABLE {{ qname }} (
{% for c in columns %}
    {{ qc(c.name) }} {{ c.type }}{% if c.collation %} COLLATE {{ c.collation }}{% endif %}{% if c.sparse is defined and c.sparse %} SPARSE{% endif %} {{ "NULL" if c.nullable else "NOT NULL" }}{{ "," if not loop.last }}
{% endfor %}
) ON {{ qc(filegroup) }}{% if compression and compression != "NONE" %} WITH (DATA_COMPRESSION = {{ compression }}){% endif %}{{ end }}
{%- endmacro %}
{% macro create_indexes(qname, indexes, filegroup, compression, constraint_names, end=";", maxdop=none, sort_in_tempdb=false) -%}
{% for i in indexes %}
{% if loop.first %}
-- The target's indexes, each with its columns, order and data compression, on the partition's
-- filegroup: SWITCH needs the same clustered index and every index of the target on the
-- source, aligned with the partition; built here, before the commit, they are attached as
-- they are (metadata only). A primary key or unique constraint is made as a constraint.
{% if sort_in_tempdb %}
-- SORT_IN_TEMPDB = ON: the build's sort runs in tempdb, so the stream's filegroup needs room
-- for the finished index only, not also for its sort runs
-- (https://learn.microsoft.com/en-us/sql/relational-databases/indexes/sort-in-tempdb-option-for-indexes).
{% endif %}
{% if maxdop %}
-- MAXDOP = {{ maxdop | int }} (an index option of CREATE INDEX and of ALTER TABLE ... ADD CONSTRAINT):
-- the build's plan uses at most that many schedulers; 1 suppresses its parallel plan. The
-- other streams' bulk loads keep the other schedulers busy, one each.
{% endif %}
{% endif %}
{% if i.constraint %}
ALTER TABLE {{ qname }} ADD CONSTRAINT {{ qc(constraint_names[i.name]) }} {{ "PRIMARY KEY" if i.primary_key else "UNIQUE" }} {{ "CLUSTERED" if i.clustered else "NONCLUSTERED" }} ({% for c, desc in i.keys %}{{ qc(c) }}{{ " DESC" if desc }}{{ ", " if not loop.last }}{% endfor %}) WITH (DATA_COMPRESSION = {{ compression.get(i.name, "NONE") }}{% if sort_in_tempdb %}, SORT_IN_TEMPDB = ON{% endif %}{% if maxdop %}, MAXDOP = {{ maxdop | int }}{% endif %}) ON {{ qc(filegroup) }}{{ end }}
{% else %}
CREATE {{ "UNIQUE " if i.unique }}{{ "CLUSTERED" if i.clustered else "NONCLUSTERED" }} INDEX {{ qc(i.name) }} ON {{ qname }} ({% for c, desc in i.keys %}{{ qc(c) }}{{ " DESC" if desc }}{{ ", " if not loop.last }}{% endfor %}){% if i.included %} INCLUDE ({% for c in i.included %}{{ qc(c) }}{{ ", " if not loop.last }}{% endfor %}){% endif %} WITH (DATA_COMPRESSION = {{ compression.get(i.name, "NONE") }}{% if sort_in_tempdb %}, SORT_IN_TEMPDB = ON{% endif %}{% if maxdop %}, MAXDOP = {{ maxdop | int }}{% endif %}) ON {{ qc(filegroup) }}{{ end }}
{% endif %}
{% endfor %}
{%- endmacro %}

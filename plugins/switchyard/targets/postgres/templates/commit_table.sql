-- The table's batch goes in whole, in the transaction of its last switch: readers see the
-- table before it or after it, never a mix. The lock is held already: the adapter takes it
-- before it reads the table's partitions, in attempts of a second at most, so that readers
-- never queue long behind its waiting request; it holds them off only for the statements
-- below, which change catalog entries and move no rows. Here it is granted at once.
LOCK TABLE {{ qn(schema, table) }} IN ACCESS EXCLUSIVE MODE;
{% for name in remove %}
-- {{ name }}: {{ "replace mode: every partition of the table gives way" if mode == "replace" else "this batch's own partition from an earlier run" }}
ALTER TABLE {{ qn(schema, table) }} DETACH PARTITION {{ qn(schema, name) }};
DROP TABLE {{ qn(schema, name) }};
{% endfor %}
{% for m in move %}
ALTER TABLE {{ qn(staging_schema, next_table) }} DETACH PARTITION {{ qn(staging_schema, m.staging) }};
ALTER TABLE {{ qn(staging_schema, m.staging) }} RENAME TO {{ q(m.partition) }};
ALTER TABLE {{ qn(staging_schema, m.partition) }} SET SCHEMA {{ q(schema) }};
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE {{ qn(schema, table) }} ATTACH PARTITION {{ qn(schema, m.partition) }} {{ m.bound }};
{% endfor %}
DROP TABLE {{ qn(staging_schema, next_table) }};
{% if retire and archive_schema %}
CREATE SCHEMA IF NOT EXISTS {{ q(archive_schema) }};
{% endif %}
{% for r in retire %}
-- Retention ({{ retention }}): {{ r.name }} falls out of the window.
ALTER TABLE {{ qn(schema, table) }} DETACH PARTITION {{ qn(schema, r.name) }};
{% if archive_schema %}
{% if r.archived_as != r.name %}
ALTER TABLE {{ qn(schema, r.name) }} RENAME TO {{ q(r.archived_as) }};
{% endif %}
{% for x in r.indexes %}
-- Its index {{ x.index }} moves with it; the archive holds that name already.
ALTER INDEX {{ qn(schema, x.index) }} RENAME TO {{ q(x.as) }};
{% endfor %}
ALTER TABLE {{ qn(schema, r.archived_as) }} SET SCHEMA {{ q(archive_schema) }};
{% else %}
DROP TABLE {{ qn(schema, r.name) }};
{% endif %}
{% endfor %}

-- Small unpartitioned tables are replaced whole, in one transaction.
SET LOCAL lock_timeout = '{{ lock_timeout_seconds }}s';
-- DELETE, not TRUNCATE: a transaction whose snapshot is older than this one would find a
-- truncated table empty (https://www.postgresql.org/docs/current/mvcc-caveats.html).
DELETE FROM {{ qn(schema, s.table) }};
INSERT INTO {{ qn(schema, s.table) }} ({% for c in columns %}{{ q(c.name) }}{{ ", " if not loop.last }}{% endfor %})
    SELECT {% for c in columns %}{{ q(c.name) }}{{ ", " if not loop.last }}{% endfor %} FROM {{ qn(staging_schema, s.staging_table) }};
DROP TABLE {{ qn(staging_schema, s.staging_table) }};

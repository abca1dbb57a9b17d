-- The spec's unique columns of {{ s.table }}, checked on the loaded staging table: building a
-- unique index sorts the rows and fails at the first duplicate. It is the index the target's
-- table has (setup.sql){% if s.partitioned %}, so ATTACH PARTITION adopts it instead of building one{% endif %}.
-- IF NOT EXISTS: a retried validation finds the index an earlier attempt built.
CREATE UNIQUE INDEX IF NOT EXISTS {{ q(index) }}
    ON {{ qn(staging_schema, s.staging_table) }} ({% for c in columns %}{{ q(c) }}{{ ", " if not loop.last }}{% endfor %}){% if tablespace %} TABLESPACE {{ q(tablespace) }}{% endif %};

-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS {{ qn(staging_schema, s.staging_table) }};
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE {{ qn(staging_schema, s.staging_table) }} (
    LIKE {{ qn(schema, s.table) }} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION{{ "," if eol_column }}
{% if eol_column %}
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    {{ q(eol_column) }} text NOT NULL CONSTRAINT {{ q(s.staging_table ~ "_eol") }} CHECK ({{ q(eol_column) }} = '')
{% endif %}
){% if tablespace %} TABLESPACE {{ q(tablespace) }}{% endif %};
{% if s.partitioned %}
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE {{ qn(staging_schema, s.staging_table) }}
    ADD CONSTRAINT {{ q(s.staging_table ~ "_range") }}
    CHECK ({{ q(key) }} IS NOT NULL AND {{ q(key) }} >= {{ lit(lower) }} AND {{ q(key) }} < {{ lit(upper_next) }});
{% endif %}

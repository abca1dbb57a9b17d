-- A failed earlier attempt's staging table is replaced, never appended to.
DROP TABLE IF EXISTS {{ qn(staging_schema, s.staging_table) }};
-- Same columns, types, nullability and length CHECKs (same names) as the target, plus one
-- trailing column that takes the empty field after each line's final delimiter; it is
-- dropped once loaded.
CREATE TABLE {{ qn(staging_schema, s.staging_table) }} (
{% for c in columns %}
    {{ q(c.name) }} {{ c.type }}{{ " NOT NULL" if not c.nullable }}{{ "," if eol_column or checks or not loop.last }}
{% endfor %}
{% if eol_column %}
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    {{ q(eol_column) }} text NOT NULL CONSTRAINT {{ q(s.staging_table ~ "_eol") }} CHECK ({{ q(eol_column) }} = ''){{ "," if checks }}
{% endif %}
{% for k in checks %}
    CONSTRAINT {{ q(k.name) }} CHECK ({{ k.sql }}){{ "," if not loop.last }}
{% endfor %}
){% if tablespace %} TABLESPACE {{ q(tablespace) }}{% endif %};
{% if s.partitioned %}
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type.
ALTER TABLE {{ qn(staging_schema, s.staging_table) }}
    ADD CONSTRAINT {{ q(s.staging_table ~ "_range") }}
    CHECK ({{ q(key) }} >= {{ lit(lower) }} AND {{ q(key) }} < {{ lit(upper_next) }});
{% endif %}

{% if eol_column %}
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE {{ qn(staging_schema, s.staging_table) }}
    ADD COLUMN IF NOT EXISTS {{ q(eol_column) }} text NOT NULL DEFAULT ''
    CONSTRAINT {{ q(s.staging_table ~ "_eol") }} CHECK ({{ q(eol_column) }} = '');
{% endif %}
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE {{ qn(staging_schema, s.staging_table) }};
{% if text_format %}
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
{% else %}
-- CSV format takes every field literally (no backslash escapes) and matches NULL per column:
-- only the nullable columns take the NULL marker, FORCE_NOT_NULL names all others. With
-- quoting none the quote character is the byte 0x01, which the client keeps out of unquoted
-- fields. targets/postgres/copy_format.py says how and why.
{% endif %}
COPY {{ qn(staging_schema, s.staging_table) }} ({% for c in columns %}{{ q(c.name) }}{{ ", " if eol_column or not loop.last }}{% endfor %}{% if eol_column %}{{ q(eol_column) }}{% endif %})
    FROM STDIN ({{ options }});
{% if eol_column %}
ALTER TABLE {{ qn(staging_schema, s.staging_table) }} DROP COLUMN {{ q(eol_column) }};
{% endif %}

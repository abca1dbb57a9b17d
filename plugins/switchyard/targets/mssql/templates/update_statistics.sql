-- {{ schema }}.{{ table_name }} took its next version by SWITCH, which moves pages: the table's
-- statistics still describe the rows switched out, and nothing makes their automatic update run
-- soon. Updated once, after the COMMIT: UPDATE STATISTICS reads the table (a table loaded whole
-- is small) under a schema-stability lock, which readers' locks are compatible with, and the
-- queries on the table compile again after it
-- (https://learn.microsoft.com/en-us/sql/t-sql/statements/update-statistics-transact-sql).
UPDATE STATISTICS {{ qn(schema, table_name) }}

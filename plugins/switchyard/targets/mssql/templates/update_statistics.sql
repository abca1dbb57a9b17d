-- {{ schema }}.{{ table_name }} took its next version by SWITCH, which moves pages: the table's
-- statistics still describe the rows switched out, and nothing makes their automatic update run
-- soon. Updated once, after the COMMIT: UPDATE STATISTICS takes a schema-stability lock, which
-- readers' locks are compatible with, and reads the table (a table loaded whole is small)
-- (https://learn.microsoft.com/en-us/sql/t-sql/statements/update-statistics-transact-sql).
UPDATE STATISTICS {{ qn(schema, table_name) }}

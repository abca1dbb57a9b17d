-- The server's progress of a COPY into one table (PostgreSQL 14+): rows and bytes so far.
-- The table name is a parameter, resolved by to_regclass; no COPY running: no row.
SELECT p.tuples_processed, p.bytes_processed
FROM pg_stat_progress_copy AS p
WHERE p.relid = to_regclass(%s::text);

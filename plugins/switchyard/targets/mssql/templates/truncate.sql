-- A retried load starts from an empty table: BULK INSERT and bulk copy commit every BATCHSIZE
-- rows, so a failed attempt leaves its first batches behind, and the retry reruns this step
-- alone (not prepare). TRUNCATE TABLE deallocates the pages (minimally logged, so the load
-- that follows still fills an empty heap) and keeps the range CHECK constraint trusted.
TRUNCATE TABLE {{ qn(staging_schema, s.staging_table) }}

-- The tables of the target schema that Switchyard loaded (the control table records their
-- batches) and that are still there, each with its batches on record: the pre-flight names those
-- the spec no longer has. Values are parameters; OBJECT_ID reads the two-part name as QUOTENAME
-- quotes it, so a name holding ] or . is found as itself.
SELECT DISTINCT table_name, batch FROM {{ qn(control_schema, "partition_batches") }}
WHERE target_schema = ?
  AND OBJECT_ID(QUOTENAME(target_schema) + N'.' + QUOTENAME(table_name), N'U') IS NOT NULL
ORDER BY table_name, batch;

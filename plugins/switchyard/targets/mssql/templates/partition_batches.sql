-- The batch each partition holds (written by the commits), for the pre-flight. Values are parameters.
SELECT key_min, key_max, batch FROM {{ qn(control_schema, "partition_batches") }}
WHERE target_schema = ? AND table_name = ?
ORDER BY key_max;

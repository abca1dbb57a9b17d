-- What a committed switch of this stream left behind (its retry finds no staging table):
-- the partition that holds exactly the stream's keys, and its rows. RANGE LEFT puts a
-- boundary value in the partition on its left, so that partition is bounded by the values
-- lower - 1 and upper; both must be boundaries of the function. Values are parameters.
SELECT ps.partition_number, SUM(ps.row_count)
FROM sys.dm_db_partition_stats AS ps
WHERE ps.object_id = OBJECT_ID(?) AND ps.index_id IN (0, 1)
  AND ps.partition_number = $PARTITION.{{ q(function) }}(?)
  AND 2 = (SELECT COUNT(*) FROM sys.partition_range_values AS rv
           JOIN sys.partition_functions AS pf ON pf.function_id = rv.function_id
           WHERE pf.name = ? AND CONVERT({{ key_type }}, rv.value) IN (?, ?))
GROUP BY ps.partition_number
HAVING SUM(ps.row_count) > 0;

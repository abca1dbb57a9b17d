-- What a committed switch of this stream left behind (its retry finds no staging table):
-- the partition that holds exactly the stream's keys, and its rows. The function is the
-- table's own, found through its data space (functions are database-wide; never by name).
-- RANGE LEFT puts a boundary value in the partition on its left: the partition of key k is
-- 1 + the number of boundaries below k, and the stream's partition is bounded by the values
-- lower - 1 and upper, both boundaries of the function. Values are parameters (time values
-- as ISO 8601 text read with style 126: datetime2(7)'s seventh digit survives the driver).
SELECT p.partition_number, SUM(p.[rows])
FROM sys.partitions AS p
JOIN sys.indexes AS i ON i.[object_id] = p.[object_id] AND i.index_id = p.index_id
JOIN sys.partition_schemes AS ps ON ps.data_space_id = i.data_space_id
WHERE p.[object_id] = OBJECT_ID(?, N'U') AND p.index_id IN (0, 1)
  AND p.partition_number = 1 + (SELECT COUNT(*) FROM sys.partition_range_values AS rv
                                WHERE rv.function_id = ps.function_id AND CONVERT({{ key_type }}, rv.[value]) < {{ param }})
  AND 2 = (SELECT COUNT(*) FROM sys.partition_range_values AS rv
           WHERE rv.function_id = ps.function_id AND CONVERT({{ key_type }}, rv.[value]) IN ({{ param }}, {{ param }}))
GROUP BY p.partition_number
HAVING SUM(p.[rows]) > 0;

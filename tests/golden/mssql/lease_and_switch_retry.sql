-- Take the schema's run lease when it is free, already this run's, or lapsed; renew it when it
-- is this run's (a renewed lease keeps its batch and acquired_at). One batch, one transaction
-- (XACT_ABORT rolls it back on any error); values are parameters, times are UTC.
-- MERGE alone is not atomic against a concurrent claim: two sessions could both find the key
-- missing and both insert (a duplicate key, 2627), or both find the lease lapsed. WITH
-- (HOLDLOCK) runs it under SERIALIZABLE: the key-range lock it takes on the schema's key,
-- row or no row, is held to COMMIT, so a second claim waits and then sees the first one's
-- live row. The SELECT under the same lock names who holds the lease now.
SET XACT_ABORT ON
DECLARE @schema nvarchar(128) = ?, @holder nvarchar(520) = ?, @batch nvarchar(1000) = ?, @ttl int = ?
DECLARE @now datetime2(3) = SYSUTCDATETIME()
BEGIN TRANSACTION
-- SET expressions read the row as it was before the update (SQL Server evaluates every one
-- against the old values), so the CASEs see the previous holder.
MERGE [switchyard].[run_lease] WITH (HOLDLOCK) AS l
USING (VALUES (@schema, @holder, @batch)) AS c ([target_schema], [holder], [batch])
    ON l.[target_schema] = c.[target_schema]
WHEN MATCHED AND (l.[holder] = c.[holder] OR l.[expires_at] < @now) THEN UPDATE SET
    [batch] = CASE WHEN l.[holder] = c.[holder] THEN l.[batch] ELSE c.[batch] END,
    [acquired_at] = CASE WHEN l.[holder] = c.[holder] THEN l.[acquired_at] ELSE @now END,
    [holder] = c.[holder],
    [expires_at] = DATEADD(SECOND, @ttl, @now)
WHEN NOT MATCHED THEN INSERT ([target_schema], [holder], [batch], [acquired_at], [expires_at])
    VALUES (c.[target_schema], c.[holder], c.[batch], @now, DATEADD(SECOND, @ttl, @now)); -- MERGE must end with ';' (error 10713)
SELECT [holder], [batch], [acquired_at], [expires_at] FROM [switchyard].[run_lease]
WHERE [target_schema] = @schema
COMMIT TRANSACTION;
GO
-- The run's lease ends with its stats task; only the holder's own row goes.
DELETE FROM [switchyard].[run_lease]
WHERE [target_schema] = ? AND [holder] = ?;
GO
-- By hand, when the run that holds the lease is dead (or let it lapse).
DELETE FROM [switchyard].[run_lease]
WHERE [target_schema] = N'tpch';
GO
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
                                WHERE rv.function_id = ps.function_id AND CONVERT(bigint, rv.[value]) < ?)
  AND 2 = (SELECT COUNT(*) FROM sys.partition_range_values AS rv
           WHERE rv.function_id = ps.function_id AND CONVERT(bigint, rv.[value]) IN (?, ?))
GROUP BY p.partition_number
HAVING SUM(p.[rows]) > 0;
GO

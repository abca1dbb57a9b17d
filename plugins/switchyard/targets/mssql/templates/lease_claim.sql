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
MERGE {{ qn(control_schema, "run_lease") }} WITH (HOLDLOCK) AS l
USING (VALUES (@schema, @holder, @batch)) AS c ([target_schema], [holder], [batch])
    ON l.[target_schema] = c.[target_schema]
WHEN MATCHED AND (l.[holder] = c.[holder] OR l.[expires_at] < @now) THEN UPDATE SET
    [batch] = CASE WHEN l.[holder] = c.[holder] THEN l.[batch] ELSE c.[batch] END,
    [acquired_at] = CASE WHEN l.[holder] = c.[holder] THEN l.[acquired_at] ELSE @now END,
    [holder] = c.[holder],
    [expires_at] = DATEADD(SECOND, @ttl, @now)
WHEN NOT MATCHED THEN INSERT ([target_schema], [holder], [batch], [acquired_at], [expires_at])
    VALUES (c.[target_schema], c.[holder], c.[batch], @now, DATEADD(SECOND, @ttl, @now)); -- MERGE must end with ';' (error 10713)
SELECT [holder], [batch], [acquired_at], [expires_at] FROM {{ qn(control_schema, "run_lease") }}
WHERE [target_schema] = @schema
COMMIT TRANSACTION;

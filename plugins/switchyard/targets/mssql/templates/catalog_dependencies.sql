-- Pre-flight, 6 of 6: what else about the target can make the commit's TRUNCATE, SWITCH, SPLIT
-- or MERGE fail after a multi-hour load, one row per finding: (kind, name, detail, flag).
--   check         a CHECK constraint (detail: its definition as the catalog keeps it; flag:
--                 1 when disabled): SWITCH needs the staging table to carry it, trusted;
--   fk_in         a foreign key of another table referencing the target (detail: that table):
--                 TRUNCATE TABLE refuses a referenced table (Msg 4712);
--   fk_out        a foreign key of the target (detail: the table it references): SWITCH needs
--                 the staging table to carry it, trusted;
--   indexed_view  a schema-bound view with an index over the target: TRUNCATE refuses a table
--                 in an indexed view, and SWITCH needs its partitions aligned;
--   cdc           change data capture tracks the table: TRUNCATE refuses it;
--   replication   the table is published (transactional, merge or snapshot) or subscribed:
--                 TRUNCATE refuses a published table, SWITCH needs the publication's
--                 allow_partition_switch;
--   temporal      a system-versioned table or a history table (detail: temporal_type_desc):
--                 TRUNCATE is refused while SYSTEM_VERSIONING is ON.
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/truncate-table-transact-sql
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql (SWITCH)
-- Values are parameters: the target's name, once, in the CTE.
WITH target AS (SELECT OBJECT_ID(?, N'U') AS id)
SELECT N'check' AS kind, cc.name, cc.[definition] AS detail, CONVERT(int, cc.is_disabled) AS flag
FROM target JOIN sys.check_constraints AS cc ON cc.parent_object_id = target.id
UNION ALL
SELECT N'fk_in', fk.name, QUOTENAME(OBJECT_SCHEMA_NAME(fk.parent_object_id)) + N'.' + QUOTENAME(OBJECT_NAME(fk.parent_object_id)), 0
FROM target JOIN sys.foreign_keys AS fk ON fk.referenced_object_id = target.id
UNION ALL
SELECT N'fk_out', fk.name, QUOTENAME(OBJECT_SCHEMA_NAME(fk.referenced_object_id)) + N'.' + QUOTENAME(OBJECT_NAME(fk.referenced_object_id)), 0
FROM target JOIN sys.foreign_keys AS fk ON fk.parent_object_id = target.id AND fk.referenced_object_id <> target.id
UNION ALL
SELECT DISTINCT N'indexed_view', QUOTENAME(OBJECT_SCHEMA_NAME(v.[object_id])) + N'.' + QUOTENAME(v.name), NULL, 0
FROM target
JOIN sys.sql_expression_dependencies AS d ON d.referenced_id = target.id
JOIN sys.views AS v ON v.[object_id] = d.referencing_id
WHERE EXISTS (SELECT 1 FROM sys.indexes AS vi WHERE vi.[object_id] = v.[object_id] AND vi.index_id > 0)
UNION ALL
SELECT N'cdc', t.name, NULL, 0
FROM target JOIN sys.tables AS t ON t.[object_id] = target.id
WHERE t.is_tracked_by_cdc = 1
UNION ALL
SELECT N'replication', t.name, NULL, 0
FROM target JOIN sys.tables AS t ON t.[object_id] = target.id
WHERE t.is_replicated = 1 OR t.is_merge_published = 1 OR t.is_published = 1 OR t.is_schema_published = 1
   OR t.is_sync_tran_subscribed = 1
UNION ALL
SELECT N'temporal', t.name, t.temporal_type_desc, t.temporal_type
FROM target JOIN sys.tables AS t ON t.[object_id] = target.id
WHERE t.temporal_type <> 0;

-- Pre-flight, 5 of 6: the target's columns in order, as the staging tables must have them
-- (SWITCH needs the same names, types, lengths, precision, scale, collation, nullability and
-- order; a sparse column is made sparse there too; computed columns are refused: the staging
-- table loads every column from the file), and the other tables and indexes on the same partition function: ALTER PARTITION
-- FUNCTION repartitions all of them in one transaction. Last, every scheme of the function: a
-- SPLIT needs a NEXT USED filegroup in each of them, the table's own and any other an index of
-- the table is on
-- (https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-partition-function-transact-sql).
SELECT c.name, TYPE_NAME(c.system_type_id) AS type_name, c.max_length, c.[precision], c.scale, c.is_nullable,
       c.collation_name, c.is_computed, c.is_identity, TYPE_NAME(c.user_type_id) AS declared_type, c.is_sparse
FROM sys.columns AS c
WHERE c.[object_id] = OBJECT_ID(?, N'U')
ORDER BY c.column_id;
SELECT DISTINCT QUOTENAME(OBJECT_SCHEMA_NAME(i.[object_id])) + N'.' + QUOTENAME(OBJECT_NAME(i.[object_id]))
FROM sys.indexes AS i
JOIN sys.partition_schemes AS ps ON ps.data_space_id = i.data_space_id
WHERE ps.function_id = ? AND i.[object_id] <> OBJECT_ID(?, N'U');
SELECT ps.name
FROM sys.partition_schemes AS ps
WHERE ps.function_id = ?
ORDER BY ps.name;

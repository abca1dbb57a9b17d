-- table
-- Pre-flight, 1 of 5: the target table and how it is partitioned. Values are parameters.
-- The heap or clustered index (index_id 0 or 1) says where the table lives: a filegroup, or a
-- partition scheme (sys.partition_schemes) whose function (sys.partition_functions) is RANGE
-- LEFT when boundary_value_on_right = 0, typed by sys.partition_parameters, on the column
-- whose partition_ordinal is 1. Partition functions and schemes are database-wide objects: the
-- function is found through the table, never by its name.
SELECT ds.[type] AS data_space_type, ds.name AS data_space, pf.function_id, pf.name AS function_name,
       pf.boundary_value_on_right, pf.fanout, TYPE_NAME(pp.system_type_id) AS parameter_type, pp.max_length,
       pp.[precision], pp.scale, COL_NAME(ic.[object_id], ic.column_id) AS partition_column
FROM sys.indexes AS i
JOIN sys.data_spaces AS ds ON ds.data_space_id = i.data_space_id
LEFT JOIN sys.partition_schemes AS ps ON ps.data_space_id = i.data_space_id
LEFT JOIN sys.partition_functions AS pf ON pf.function_id = ps.function_id
LEFT JOIN sys.partition_parameters AS pp ON pp.function_id = pf.function_id AND pp.parameter_id = 1
LEFT JOIN sys.index_columns AS ic
       ON ic.[object_id] = i.[object_id] AND ic.index_id = i.index_id AND ic.partition_ordinal = 1
WHERE i.[object_id] = OBJECT_ID(?, N'U') AND i.index_id IN (0, 1);
GO
-- boundaries
-- Pre-flight, 2 of 5: the function's boundary values in order, converted to the key's type
-- (sys.partition_range_values keeps them as sql_variant). RANGE LEFT: boundary_id k closes
-- partition k on its right end.
SELECT rv.boundary_id, CONVERT(bigint, rv.[value]) AS boundary
FROM sys.partition_range_values AS rv
WHERE rv.function_id = ? AND rv.parameter_id = 1
ORDER BY rv.boundary_id;
GO
-- partitions
-- Pre-flight, 3 of 5: each partition of each index: its rows, data compression and filegroup
-- (sys.destination_data_spaces maps the scheme's destination k, partition k, to a filegroup).
-- The heap or clustered index (index_id 0 or 1) counts the table's rows. SWITCH needs a
-- staging table on the partition's filegroup with the partition's compression, so both are
-- read here for every index.
SELECT p.index_id, i.name AS index_name, p.partition_number, p.[rows], p.data_compression_desc,
       fg.name AS filegroup
FROM sys.partitions AS p
JOIN sys.indexes AS i ON i.[object_id] = p.[object_id] AND i.index_id = p.index_id
LEFT JOIN sys.destination_data_spaces AS dds
       ON dds.partition_scheme_id = i.data_space_id AND dds.destination_id = p.partition_number
LEFT JOIN sys.filegroups AS fg ON fg.data_space_id = COALESCE(dds.data_space_id, i.data_space_id)
WHERE p.[object_id] = OBJECT_ID(?, N'U')
ORDER BY p.index_id, p.partition_number;
GO
-- indexes
-- Pre-flight, 4 of 5: the target's indexes and their columns, to build them on each staging
-- table before SWITCH (SWITCH needs the same clustered index and every index of the target,
-- aligned: partitioned on the table's scheme, `aligned` = 1) and to check them here. A
-- disabled index or a columnstore one is reported, not reproduced.
SELECT i.index_id, i.name, i.type_desc, i.is_unique, i.is_primary_key, i.is_unique_constraint, i.is_disabled,
       i.has_filter, i.filter_definition,
       CASE WHEN i.data_space_id = t.data_space_id THEN 1 ELSE 0 END AS aligned,
       COL_NAME(ic.[object_id], ic.column_id) AS column_name, ic.key_ordinal, ic.is_descending_key,
       ic.is_included_column
FROM sys.indexes AS i
JOIN sys.indexes AS t ON t.[object_id] = i.[object_id] AND t.index_id IN (0, 1)
LEFT JOIN sys.index_columns AS ic ON ic.[object_id] = i.[object_id] AND ic.index_id = i.index_id
WHERE i.[object_id] = OBJECT_ID(?, N'U') AND i.index_id > 0
ORDER BY i.index_id, ic.is_included_column, ic.key_ordinal, ic.index_column_id;
GO
-- columns
-- Pre-flight, 5 of 5: the target's columns in order, as the staging tables must have them
-- (SWITCH needs the same names, types, lengths, precision, scale, collation, nullability and
-- order), and the other tables and indexes on the same partition function: ALTER PARTITION
-- FUNCTION repartitions all of them in one transaction.
SELECT c.name, TYPE_NAME(c.system_type_id) AS type_name, c.max_length, c.[precision], c.scale, c.is_nullable,
       c.collation_name, c.is_computed, c.is_identity, TYPE_NAME(c.user_type_id) AS declared_type
FROM sys.columns AS c
WHERE c.[object_id] = OBJECT_ID(?, N'U')
ORDER BY c.column_id;
GO
-- shared
SELECT DISTINCT QUOTENAME(OBJECT_SCHEMA_NAME(i.[object_id])) + N'.' + QUOTENAME(OBJECT_NAME(i.[object_id]))
FROM sys.indexes AS i
JOIN sys.partition_schemes AS ps ON ps.data_space_id = i.data_space_id
WHERE ps.function_id = ? AND i.[object_id] <> OBJECT_ID(?, N'U');
GO
-- batches
-- The batch each partition holds (written by the commits), for the pre-flight. Values are parameters.
SELECT key_min, key_max, batch FROM [switchyard].[partition_batches]
WHERE target_schema = ? AND table_name = ?
ORDER BY key_max;
GO

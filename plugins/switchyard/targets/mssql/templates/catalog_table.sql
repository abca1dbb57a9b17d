-- Pre-flight, 1 of 6: the target table and how it is partitioned. Values are parameters.
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

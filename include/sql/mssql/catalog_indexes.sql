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

-- Pre-flight, 4 of 6: the target's indexes and their columns, to build them on each staging
-- table before SWITCH (SWITCH needs the same clustered index and every index of the target,
-- aligned) and to check them here. A disabled index or a columnstore one is reported, not
-- reproduced. `aligned` = 1: the index is partitioned by the table's partitioning column on a
-- scheme of the table's own partition function (any scheme: the function is what the
-- commit's SPLIT and MERGE change, for every index on it at once). An index on another,
-- equal function is aligned today but would not be after a SPLIT or MERGE: it counts as not
-- aligned. https://learn.microsoft.com/en-us/sql/relational-databases/partitions/partitioned-tables-and-indexes#aligned-index
SELECT i.index_id, i.name, i.type_desc, i.is_unique, i.is_primary_key, i.is_unique_constraint, i.is_disabled,
       i.has_filter, i.filter_definition,
       CASE WHEN ips.function_id = tps.function_id
             AND (SELECT ipc.column_id FROM sys.index_columns AS ipc WHERE ipc.[object_id] = i.[object_id]
                  AND ipc.index_id = i.index_id AND ipc.partition_ordinal = 1)
               = (SELECT tpc.column_id FROM sys.index_columns AS tpc WHERE tpc.[object_id] = t.[object_id]
                  AND tpc.index_id = t.index_id AND tpc.partition_ordinal = 1)
            THEN 1 ELSE 0 END AS aligned,
       COL_NAME(ic.[object_id], ic.column_id) AS column_name, ic.key_ordinal, ic.is_descending_key,
       ic.is_included_column
FROM sys.indexes AS i
JOIN sys.indexes AS t ON t.[object_id] = i.[object_id] AND t.index_id IN (0, 1)
LEFT JOIN sys.partition_schemes AS ips ON ips.data_space_id = i.data_space_id
LEFT JOIN sys.partition_schemes AS tps ON tps.data_space_id = t.data_space_id
LEFT JOIN sys.index_columns AS ic ON ic.[object_id] = i.[object_id] AND ic.index_id = i.index_id
-- A hypothetical index (left by the Database Engine Tuning Advisor) has no data: SWITCH does not
-- compare it, and it is neither refused nor built (sys.indexes, is_hypothetical).
WHERE i.[object_id] = OBJECT_ID(?, N'U') AND i.index_id > 0 AND i.is_hypothetical = 0
ORDER BY i.index_id, ic.is_included_column, ic.key_ordinal, ic.index_column_id;

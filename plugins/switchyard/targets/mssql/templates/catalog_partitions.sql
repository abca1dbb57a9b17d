-- Pre-flight, 3 of 6: each partition of each index: its rows, data compression and filegroup
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

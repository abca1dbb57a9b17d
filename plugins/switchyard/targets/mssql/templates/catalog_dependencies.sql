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
--                 TRUNCATE and SWITCH OUT are refused on a system-versioned table, SWITCH IN on
--                 a history table, while SYSTEM_VERSIONING is ON;
--   ledger        a ledger table (name: one of the columns the ledger generates, GENERATED
--                 ALWAYS AS TRANSACTION_ID or SEQUENCE_NUMBER, sys.columns.generated_always_type
--                 7 to 10, in the catalog since SQL Server 2016, unlike sys.tables.ledger_type):
--                 TRUNCATE TABLE is not supported on a ledger table, nor deleting its rows, and a
--                 ledger table can never become an ordinary one;
--   change_tracking  change tracking is enabled on the table: SWITCH fails on it (Msg 4900);
--   set_option    the table was created with ANSI_NULLS or QUOTED_IDENTIFIER OFF (name: the
--                 option): SWITCH needs both tables' settings the same, and the staging tables
--                 are created with both ON (as every ODBC session has them);
--   column        a column property the staging tables do not have (name: the column, detail:
--                 the property: ROWGUIDCOL, FILESTREAM, an XML schema collection, ANSI_PADDING
--                 OFF on a char, varchar, binary or varbinary column): SWITCH needs it the same
--                 on both tables;
--   fulltext      a full-text index on the table: SWITCH refuses such a table (Msg 4918);
--   read_only     a read-only filegroup (name) holding a partition of the table, of an index
--                 of it or of its LOB data: TRUNCATE (Msg 4707) and SWITCH (Msg 4978-4981)
--                 refuse such a partition, and the commit replaces and retires partitions;
--   table_option  a table option the staging tables are created without (name: the option,
--                 sp_tableoption's 'large value types out of row', 'text in row', or
--                 'vardecimal storage format'): SWITCH needs it the same on both tables
--                 (Msg 4993, 4954, 4984);
--   check_nfr     a CHECK constraint NOT FOR REPLICATION (detail: its definition): SWITCH needs
--                 the staging table's copy to have the same setting (Msg 4975);
--   rule          a rule bound to a column (name: the column): SWITCH is not allowed on a table
--                 with a RULE (Msg 4964);
--   lob_filegroup the table's large values (TEXTIMAGE_ON) are on another data space (name) than
--                 its heap or clustered index: SWITCH needs both tables' large values on the same
--                 filegroup, and a staging table keeps them with its rows, so a table loaded
--                 whole is then replaced by TRUNCATE TABLE and INSERT ... SELECT instead;
--   permission    a permission the commit's statements need that the login running the
--                 pre-flight (the one the run uses) lacks (name: the permission, detail: the
--                 database user): ALTER on the table for TRUNCATE TABLE and SWITCH ("ALTER TABLE
--                 permissions apply to both tables involved in an ALTER TABLE SWITCH
--                 statement"), ALTER ANY DATASPACE for the partition function's SPLIT and MERGE
--                 and the scheme's NEXT USED (ALTER PARTITION FUNCTION, Permissions).
--                 HAS_PERMS_BY_NAME answers with the effective permission, implied ones (CONTROL
--                 on the database, db_owner, db_ddladmin) included.
-- https://learn.microsoft.com/en-us/sql/relational-databases/errors-events/database-engine-events-and-errors-4000-to-4999
--   (the error each rule above names)
-- https://learn.microsoft.com/en-us/sql/relational-databases/system-stored-procedures/sp-tableoption-transact-sql
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/truncate-table-transact-sql
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql (SWITCH)
-- https://learn.microsoft.com/en-us/sql/relational-databases/tables/temporal/partitioning
-- https://learn.microsoft.com/en-us/sql/relational-databases/security/ledger/ledger-limits
-- https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/sys-columns-transact-sql
-- https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008-r2/ms191160(v=sql.105)
--   (the structure both tables of a SWITCH must share)
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-partition-function-transact-sql#permissions
-- https://learn.microsoft.com/en-us/sql/t-sql/functions/has-perms-by-name-transact-sql
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
WHERE t.temporal_type <> 0
UNION ALL
SELECT N'ledger', MIN(c.name), NULL, 0
FROM target JOIN sys.columns AS c ON c.[object_id] = target.id
WHERE c.generated_always_type BETWEEN 7 AND 10
HAVING COUNT(*) > 0
UNION ALL
SELECT N'change_tracking', t.name, NULL, 0
FROM target
JOIN sys.tables AS t ON t.[object_id] = target.id
JOIN sys.change_tracking_tables AS ct ON ct.[object_id] = target.id
UNION ALL
SELECT N'set_option', o.[option], NULL, 0
FROM target
JOIN sys.tables AS t ON t.[object_id] = target.id
CROSS APPLY (VALUES (N'ANSI_NULLS', CONVERT(int, t.uses_ansi_nulls)),
                    (N'QUOTED_IDENTIFIER', OBJECTPROPERTY(target.id, N'IsQuotedIdentOn'))) AS o ([option], [on])
WHERE o.[on] = 0
UNION ALL
SELECT N'column', c.name, p.property, 0
FROM target
JOIN sys.columns AS c ON c.[object_id] = target.id
CROSS APPLY (VALUES (N'ROWGUIDCOL', CONVERT(int, c.is_rowguidcol)),
                    (N'FILESTREAM', CONVERT(int, c.is_filestream)),
                    (N'an XML schema collection', CASE WHEN c.xml_collection_id <> 0 THEN 1 ELSE 0 END),
                    (N'ANSI_PADDING OFF', CASE WHEN c.is_ansi_padded = 0
                                                    AND TYPE_NAME(c.system_type_id) IN (N'char', N'varchar', N'binary', N'varbinary')
                                               THEN 1 ELSE 0 END)) AS p (property, [set])
WHERE p.[set] = 1
UNION ALL
SELECT N'fulltext', t.name, NULL, 0
FROM target JOIN sys.tables AS t ON t.[object_id] = target.id
WHERE EXISTS (SELECT 1 FROM sys.fulltext_indexes AS fi WHERE fi.[object_id] = target.id)
UNION ALL
-- The data spaces of the table's indexes and of its LOB data: a filegroup, or a partition scheme
-- whose destinations are filegroups.
SELECT DISTINCT N'read_only', fg.name, NULL, 0
FROM target
CROSS APPLY (SELECT i.data_space_id FROM sys.indexes AS i WHERE i.[object_id] = target.id
             UNION SELECT t.lob_data_space_id FROM sys.tables AS t WHERE t.[object_id] = target.id) AS ds (id)
LEFT JOIN sys.destination_data_spaces AS dds ON dds.partition_scheme_id = ds.id
JOIN sys.filegroups AS fg ON fg.data_space_id = COALESCE(dds.data_space_id, ds.id)
WHERE fg.is_read_only = 1
UNION ALL
SELECT N'table_option', o.[option], NULL, 0
FROM target
JOIN sys.tables AS t ON t.[object_id] = target.id
CROSS APPLY (VALUES (N'large value types out of row', CONVERT(int, t.large_value_types_out_of_row)),
                    (N'text in row', CASE WHEN t.text_in_row_limit <> 0 THEN 1 ELSE 0 END),
                    (N'vardecimal storage format', OBJECTPROPERTY(target.id, N'TableHasVarDecimalStorageFormat'))
            ) AS o ([option], [on])
WHERE o.[on] = 1
UNION ALL
SELECT N'check_nfr', cc.name, cc.[definition], 0
FROM target JOIN sys.check_constraints AS cc ON cc.parent_object_id = target.id
WHERE cc.is_not_for_replication = 1 AND cc.is_disabled = 0
UNION ALL
SELECT N'rule', c.name, OBJECT_NAME(c.rule_object_id), 0
FROM target JOIN sys.columns AS c ON c.[object_id] = target.id
WHERE c.rule_object_id <> 0
UNION ALL
SELECT N'lob_filegroup', ds.name, NULL, 0
FROM target
JOIN sys.tables AS t ON t.[object_id] = target.id
JOIN sys.indexes AS i ON i.[object_id] = target.id AND i.index_id IN (0, 1)
JOIN sys.data_spaces AS ds ON ds.data_space_id = t.lob_data_space_id
WHERE t.lob_data_space_id <> 0 AND t.lob_data_space_id <> i.data_space_id
UNION ALL
SELECT N'permission', N'ALTER', USER_NAME(), 0
FROM target
WHERE HAS_PERMS_BY_NAME(QUOTENAME(OBJECT_SCHEMA_NAME(target.id)) + N'.' + QUOTENAME(OBJECT_NAME(target.id)),
                        N'OBJECT', N'ALTER') = 0
UNION ALL
SELECT N'permission', N'ALTER ANY DATASPACE', USER_NAME(), 0
FROM target
WHERE target.id IS NOT NULL AND HAS_PERMS_BY_NAME(NULL, NULL, N'ALTER ANY DATASPACE') = 0;

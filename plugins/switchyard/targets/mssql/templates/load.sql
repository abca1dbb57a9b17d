{% macro bulk_insert(rowterminator, sep, more) -%}
BULK INSERT {{ qn(staging_schema, s.staging_table) }}{{ sep }}FROM {{ str(server_path) }}{{ sep }}WITH (DATAFILETYPE = 'char'{% if csv %}, FORMAT = 'CSV', FIELDQUOTE = '"'{% endif %}, FIELDTERMINATOR = {{ field_terminator }}, ROWTERMINATOR = {{ rowterminator }}{% if first_row > 1 %}, FIRSTROW = {{ lit(first_row) }}{% endif %}{% if codepage %}, CODEPAGE = {{ str(codepage) }}{% endif %}{% if keepnulls %}, KEEPNULLS{% endif %},{{ more }}TABLOCK, CHECK_CONSTRAINTS, BATCHSIZE = {{ lit(batch_size) }}, MAXERRORS = 0)
{%- endmacro %}
{% if guard %}
-- One load per scheduler, as the 2010 record run did it: the request runs on one scheduler
-- for its whole batch, so the claim and the BULK INSERT below are on the same one. The
-- session-owned applock names the scheduler; a second load there fails at once (error
-- {{ busy_error }}) and the loader reconnects to land elsewhere. The scheduler is kept in the
-- session context for the statistics read after the load.
DECLARE @scheduler int = (SELECT scheduler_id FROM sys.dm_exec_requests WHERE session_id = @@SPID)
DECLARE @resource nvarchar(255) = CONCAT(N'switchyard.scheduler.', @scheduler)
DECLARE @rc int
EXEC @rc = sp_getapplock @Resource = @resource, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0
IF @rc < 0
    THROW {{ busy_error }}, {{ nstr(busy_message) }}, 1
EXEC sp_set_session_context N'switchyard.scheduler', @scheduler
{% endif %}
{% include "truncate.sql" %}
-- DATAFILETYPE 'char': every field is taken as it is between its terminators (a backslash
-- is an ordinary byte).
{% for line in codepage_note %}
-- {{ line }}
{% endfor %}
{% if csv %}
-- FORMAT 'CSV' (2017+): RFC 4180, a field in double quotes (FIELDQUOTE) may hold the
-- delimiter, "" for a quote and line breaks.
{% endif %}
{% if first_row > 1 %}
-- FIRSTROW {{ first_row }}: the {{ first_row - 1 }} header line(s) skipped. BULK INSERT finds the rows it skips
-- by their field terminators too: a header line needs the table's field count.
{% endif %}
{% if keepnulls %}
-- KEEPNULLS: BULK INSERT reads an empty field as NULL, and without KEEPNULLS a column's
-- default replaces it
-- (https://learn.microsoft.com/en-us/sql/relational-databases/import-export/keep-nulls-or-use-default-values-during-bulk-import-sql-server):
-- with it an empty field is NULL, never a column default. NULL is what a nullable column's empty
-- field means here (the spec's NULL marker is the empty field); in a NOT NULL column, where
-- the spec means an empty string, the server refuses the NULL (error 515) and the loader
-- loads the file over the client path instead, which stores ''.
{% endif %}
-- TABLOCK into an empty heap: minimally logged under SIMPLE or BULK_LOGGED recovery.
-- CHECK_CONSTRAINTS keeps the range constraint trusted for SWITCH (without it the load
-- marks the constraint untrusted). MAXERRORS = 0: no bad line is skipped. Dates as
-- yyyy-mm-dd, read the same under every DATEFORMAT for date and datetime2; SET DATEFORMAT
-- ymd makes it so for datetime and smalldatetime too.
SET DATEFORMAT ymd
{% if row_terminator_sql %}
-- The row terminator {{ row_terminator_note }}: the hexadecimal form BULK INSERT documents for a line
-- feed ('\n' would mean CR LF to SQL Server).
{{ bulk_insert(row_terminator_sql, "\n    ", "\n          ") }};
{% else %}
-- The row terminator {{ row_terminator_note }} holds a control character: BULK INSERT takes only
-- literals, so it is built with NCHAR() and the statement run by sp_executesql, as the BULK
-- INSERT documentation builds an LF terminator ('\n' would mean CR LF to SQL Server, and no
-- line break is written inside a string literal here). The variable goes inside a literal of
-- that statement, so its quotes are doubled there (a `'` delimiter folded into the terminator).
DECLARE @rowterminator nvarchar(12) = {{ row_terminator_expr }}
DECLARE @load nvarchar(max) = {{ nstr(bulk_insert("@@ROWTERMINATOR@@", " ", " ")) | replace("@@ROWTERMINATOR@@", "''' + REPLACE(@rowterminator, N'''', N'''''') + N'''") }}
EXEC sys.sp_executesql @load;
{% endif %}

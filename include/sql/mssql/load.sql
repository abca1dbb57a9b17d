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
-- DATAFILETYPE 'char': text fields converted by the server, dates as ISO yyyy-mm-dd (read
-- the same under every DATEFORMAT for the date type). The row terminator is '|' followed by
-- a real line feed inside the literal: '\n' would mean CR LF to SQL Server, and '|0x0a' is
-- not read as hexadecimal. TABLOCK into an empty heap: minimally logged (SIMPLE or
-- BULK_LOGGED recovery). CHECK_CONSTRAINTS keeps the range constraint trusted for SWITCH
-- (without it the load marks the constraint untrusted). MAXERRORS = 0: no bad line is skipped.
BULK INSERT {{ qn(staging_schema, s.staging_table) }}
    FROM {{ str(server_path) }}
    WITH (DATAFILETYPE = 'char', FIELDTERMINATOR = {{ str(delimiter) }}, ROWTERMINATOR = {{ str(row_terminator) }},
          TABLOCK, CHECK_CONSTRAINTS, BATCHSIZE = {{ lit(batch_size) }}, MAXERRORS = 0{% if codepage %}, CODEPAGE = {{ str(codepage) }}{% endif %});

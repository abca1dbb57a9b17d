-- The run lease: one run at a time loads a target schema (see
-- docs/reliability-and-security.md); a row per target schema names the run that holds it.
-- Created before the lease is first taken, under the setup applock. CREATE SCHEMA must be
-- alone in its batch, hence EXEC of a constant string.
IF SCHEMA_ID({{ nstr(control_schema) }}) IS NULL EXEC (N'CREATE SCHEMA {{ q(control_schema) }}');
IF OBJECT_ID({{ nstr(qn(control_schema, "run_lease")) }}, N'U') IS NULL
    CREATE TABLE {{ qn(control_schema, "run_lease") }} (
        [target_schema] nvarchar(128) NOT NULL CONSTRAINT [run_lease_pk] PRIMARY KEY,
        [holder]        nvarchar(520) NOT NULL,
        [batch]         nvarchar(1000) NOT NULL,
        [acquired_at]   datetime2(3) NOT NULL,
        [expires_at]    datetime2(3) NOT NULL
    );

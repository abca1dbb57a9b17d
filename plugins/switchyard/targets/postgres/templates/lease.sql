-- The run lease: one run at a time loads a target schema (see
-- docs/reliability-and-security.md). Created before the lease is first taken, under the
-- setup advisory lock.
CREATE SCHEMA IF NOT EXISTS {{ q(control_schema) }};
CREATE TABLE IF NOT EXISTS {{ qn(control_schema, "run_lease") }} (
    target_schema text PRIMARY KEY,
    holder        text NOT NULL,
    batch         text NOT NULL,
    acquired_at   timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL
);

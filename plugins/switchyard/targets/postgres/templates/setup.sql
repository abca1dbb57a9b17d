-- Objects a load needs, created only when missing: safe on every run.
CREATE SCHEMA IF NOT EXISTS {{ q(schema) }};
CREATE SCHEMA IF NOT EXISTS {{ q(staging_schema) }};
CREATE SCHEMA IF NOT EXISTS {{ q(control_schema) }};
{% for t in tables %}
-- NOT NULL unless the spec declares the column nullable (a partition key never is: a
-- partition's constraint includes "key IS NOT NULL", and staging tables copy these
-- definitions, so ATTACH can prove the bound without a scan). A varchar(n) column is text
-- with a named length CHECK: varchar(n) would cut excess trailing spaces without an error.
CREATE TABLE IF NOT EXISTS {{ qn(schema, t.name) }} (
{% for c in t.columns %}
    {{ q(c.name) }} {{ c.type }}{{ " NOT NULL" if not c.nullable }}{{ "," if t.checks or not loop.last }}
{% endfor %}
{% for k in t.checks %}
    CONSTRAINT {{ q(k.name) }} CHECK ({{ k.sql }}){{ "," if not loop.last }}
{% endfor %}
){% if t.partitioned %} PARTITION BY RANGE ({{ q(t.key) }}){% endif %};
{% endfor %}
{% for t in tables if t.unique_index %}
-- The unique index of {{ t.name }}: the spec's `unique` columns ({{ t.unique | join(", ") }}).
-- Each stream's staging table gets the same index during validation, where a duplicate
-- fails its build; ATTACH PARTITION then adopts the partition's index instead of building
-- one. On a table that already has partitions this builds their indexes once.
CREATE UNIQUE INDEX IF NOT EXISTS {{ q(t.unique_index) }}
    ON {{ qn(schema, t.name) }} ({% for c in t.unique %}{{ q(c) }}{{ ", " if not loop.last }}{% endfor %});
{% endfor %}
-- One row per load, like the record runs' work queue; written by the run's stats task.
-- PostgreSQL has one listening port and no schedulers: the backend pid is the session.
-- Keyed by the DAG too: a run id is unique only within its DAG.
CREATE TABLE IF NOT EXISTS {{ qn(control_schema, "load_stats") }} (
    dag_id        text NOT NULL,
    run_id        text NOT NULL,
    batch         text NOT NULL,
    table_name    text NOT NULL,
    stream        integer NOT NULL,
    file          text NOT NULL,
    bytes         bigint,
    rows_loaded   bigint,
    started_at    timestamptz,
    ended_at      timestamptz,
    seconds       double precision,
    validation    text,
    backend_pid   integer,
    mb_per_s      double precision,
    rows_per_s    double precision,
    port          integer,
    outcome       text,
    PRIMARY KEY (dag_id, run_id, table_name, stream)
);
-- Tables created by an earlier version lack the later columns (nullable: no table rewrite).
ALTER TABLE {{ qn(control_schema, "load_stats") }}
    ADD COLUMN IF NOT EXISTS dag_id text,
    ADD COLUMN IF NOT EXISTS mb_per_s double precision,
    ADD COLUMN IF NOT EXISTS rows_per_s double precision,
    ADD COLUMN IF NOT EXISTS port integer,
    ADD COLUMN IF NOT EXISTS outcome text;
-- Tables created by an earlier version are keyed by (run_id, table_name, stream): the rows
-- of two DAGs' runs with the same run id overwrote each other. Re-keyed once, here, under
-- setup's advisory lock; rows written before the DAG was recorded keep dag_id ''. The
-- table name is a validated identifier, so it cannot close the regclass string literal.
DO $rekey$
DECLARE
    old_key name;
BEGIN
    SELECT c.conname INTO old_key
      FROM pg_constraint AS c
     WHERE c.conrelid = '{{ qn(control_schema, "load_stats") }}'::regclass AND c.contype = 'p'
       AND NOT EXISTS (SELECT 1 FROM pg_attribute AS a
                        WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) AND a.attname = 'dag_id');
    IF old_key IS NOT NULL THEN
        UPDATE {{ qn(control_schema, "load_stats") }} SET dag_id = '' WHERE dag_id IS NULL;
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', '{{ qn(control_schema, "load_stats") }}', old_key);
        ALTER TABLE {{ qn(control_schema, "load_stats") }}
            ALTER COLUMN dag_id SET NOT NULL,
            ADD PRIMARY KEY (dag_id, run_id, table_name, stream);
    END IF;
END
$rekey$;
-- Which batch each partition of a target table holds, written in the transaction that
-- switches the partition in: append mode's overlap check and retention read it (replace
-- mode records it too). Key bounds are kept as text, as the manifest gave them.
CREATE TABLE IF NOT EXISTS {{ qn(control_schema, "partition_batches") }} (
    target_schema  text NOT NULL,
    table_name     text NOT NULL,
    partition_name text NOT NULL,
    batch          text NOT NULL,
    key_min        text NOT NULL,
    key_max        text NOT NULL,
    rows_planned   bigint,
    run            text NOT NULL,
    switched_at    timestamptz NOT NULL,
    PRIMARY KEY (target_schema, table_name, partition_name)
);
-- A run's plan per table, written by its setup: the partitions its switches attach to the
-- table's next version; the table's last switch moves them in together and deletes them.
CREATE TABLE IF NOT EXISTS {{ qn(control_schema, "planned_partitions") }} (
    target_schema  text NOT NULL,
    table_name     text NOT NULL,
    staging_table  text NOT NULL,
    partition_name text NOT NULL,
    stream         integer NOT NULL,
    batch          text NOT NULL,
    key_min        text NOT NULL,
    key_max        text NOT NULL,
    rows_planned   bigint,
    run            text NOT NULL,
    planned_at     timestamptz NOT NULL,
    PRIMARY KEY (target_schema, table_name, staging_table)
);

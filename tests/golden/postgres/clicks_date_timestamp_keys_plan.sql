-- Switchyard load plan: spec clicks, 3 streams, target postgres, schema web
-- objects
-- Objects a load needs, created only when missing: safe on every run.
CREATE SCHEMA IF NOT EXISTS "web";
CREATE SCHEMA IF NOT EXISTS "web_staging";
CREATE SCHEMA IF NOT EXISTS "switchyard";
-- NOT NULL unless the spec declares the column nullable (a partition key never is: a
-- partition's constraint includes "key IS NOT NULL", and staging tables copy these
-- definitions, so ATTACH can prove the bound without a scan). A varchar(n) column is text
-- with a named length CHECK: varchar(n) would cut excess trailing spaces without an error.
CREATE TABLE IF NOT EXISTS "web"."daily" (
    "day" date NOT NULL,
    "n" integer NOT NULL
) PARTITION BY RANGE ("day");
-- NOT NULL unless the spec declares the column nullable (a partition key never is: a
-- partition's constraint includes "key IS NOT NULL", and staging tables copy these
-- definitions, so ATTACH can prove the bound without a scan). A varchar(n) column is text
-- with a named length CHECK: varchar(n) would cut excess trailing spaces without an error.
CREATE TABLE IF NOT EXISTS "web"."hourly" (
    "at" timestamp(3) NOT NULL,
    "n" integer NOT NULL
) PARTITION BY RANGE ("at");
-- One row per load, like the record runs' work queue; written by the run's stats task.
-- PostgreSQL has one listening port and no schedulers: the backend pid is the session.
-- Keyed by the DAG too: a run id is unique only within its DAG.
CREATE TABLE IF NOT EXISTS "switchyard"."load_stats" (
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
ALTER TABLE "switchyard"."load_stats"
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
     WHERE c.conrelid = '"switchyard"."load_stats"'::regclass AND c.contype = 'p'
       AND NOT EXISTS (SELECT 1 FROM pg_attribute AS a
                        WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey) AND a.attname = 'dag_id');
    IF old_key IS NOT NULL THEN
        UPDATE "switchyard"."load_stats" SET dag_id = '' WHERE dag_id IS NULL;
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', '"switchyard"."load_stats"', old_key);
        ALTER TABLE "switchyard"."load_stats"
            ALTER COLUMN dag_id SET NOT NULL,
            ADD PRIMARY KEY (dag_id, run_id, table_name, stream);
    END IF;
END
$rekey$;
-- Which batch each partition of a target table holds, written in the transaction that
-- switches the partition in: append mode's overlap check and retention read it (replace
-- mode records it too). Key bounds are kept as text, as the manifest gave them.
CREATE TABLE IF NOT EXISTS "switchyard"."partition_batches" (
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
CREATE TABLE IF NOT EXISTS "switchyard"."planned_partitions" (
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

-- daily_1: daily/daily.1.txt, keys 2026-03-01..2026-03-01
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "web_staging"."daily_1";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "web_staging"."daily_1" (
    LIKE "web"."daily" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "daily_1_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "web_staging"."daily_1"
    ADD CONSTRAINT "daily_1_range"
    CHECK ("day" IS NOT NULL AND "day" >= DATE '2026-03-01' AND "day" < DATE '2026-03-02');
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "web_staging"."daily_1"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "daily_1_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "web_staging"."daily_1";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "web_staging"."daily_1" ("day", "n", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "web_staging"."daily_1" DROP COLUMN "switchyard_eol";
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "web_staging"."daily__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "web_staging"."daily__next" ATTACH PARTITION "web_staging"."daily_1"
    FOR VALUES FROM (DATE '2026-03-01') TO (DATE '2026-03-02');

-- daily_2: daily/daily.2.txt, keys 2026-03-02..2026-03-02
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "web_staging"."daily_2";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "web_staging"."daily_2" (
    LIKE "web"."daily" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "daily_2_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "web_staging"."daily_2"
    ADD CONSTRAINT "daily_2_range"
    CHECK ("day" IS NOT NULL AND "day" >= DATE '2026-03-02' AND "day" < DATE '2026-03-03');
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "web_staging"."daily_2"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "daily_2_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "web_staging"."daily_2";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "web_staging"."daily_2" ("day", "n", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "web_staging"."daily_2" DROP COLUMN "switchyard_eol";
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "web_staging"."daily__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "web_staging"."daily__next" ATTACH PARTITION "web_staging"."daily_2"
    FOR VALUES FROM (DATE '2026-03-02') TO (DATE '2026-03-03');

-- hourly_1: hourly/hourly.1.txt, keys 2026-03-01T00:00:00..2026-03-01T00:59:59.999000
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "web_staging"."hourly_1";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "web_staging"."hourly_1" (
    LIKE "web"."hourly" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "hourly_1_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "web_staging"."hourly_1"
    ADD CONSTRAINT "hourly_1_range"
    CHECK ("at" IS NOT NULL AND "at" >= TIMESTAMP '2026-03-01 00:00:00.000000' AND "at" < TIMESTAMP '2026-03-01 01:00:00.000000');
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "web_staging"."hourly_1"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "hourly_1_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "web_staging"."hourly_1";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "web_staging"."hourly_1" ("at", "n", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "web_staging"."hourly_1" DROP COLUMN "switchyard_eol";
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "web_staging"."hourly__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "web_staging"."hourly__next" ATTACH PARTITION "web_staging"."hourly_1"
    FOR VALUES FROM (TIMESTAMP '2026-03-01 00:00:00.000000') TO (TIMESTAMP '2026-03-01 01:00:00.000000');

-- hourly_2: hourly/hourly.2.txt, keys 2026-03-01T01:00:00..2026-03-01T01:59:59.999000
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "web_staging"."hourly_2";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "web_staging"."hourly_2" (
    LIKE "web"."hourly" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "hourly_2_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "web_staging"."hourly_2"
    ADD CONSTRAINT "hourly_2_range"
    CHECK ("at" IS NOT NULL AND "at" >= TIMESTAMP '2026-03-01 01:00:00.000000' AND "at" < TIMESTAMP '2026-03-01 02:00:00.000000');
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "web_staging"."hourly_2"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "hourly_2_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "web_staging"."hourly_2";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "web_staging"."hourly_2" ("at", "n", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "web_staging"."hourly_2" DROP COLUMN "switchyard_eol";
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "web_staging"."hourly__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "web_staging"."hourly__next" ATTACH PARTITION "web_staging"."hourly_2"
    FOR VALUES FROM (TIMESTAMP '2026-03-01 01:00:00.000000') TO (TIMESTAMP '2026-03-01 02:00:00.000000');

-- hourly_3: hourly/hourly.3.txt, keys 2026-03-01T02:00:00..2026-03-01T02:59:59.999000
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "web_staging"."hourly_3";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "web_staging"."hourly_3" (
    LIKE "web"."hourly" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "hourly_3_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "web_staging"."hourly_3"
    ADD CONSTRAINT "hourly_3_range"
    CHECK ("at" IS NOT NULL AND "at" >= TIMESTAMP '2026-03-01 02:00:00.000000' AND "at" < TIMESTAMP '2026-03-01 03:00:00.000000');
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "web_staging"."hourly_3"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "hourly_3_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "web_staging"."hourly_3";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "web_staging"."hourly_3" ("at", "n", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "web_staging"."hourly_3" DROP COLUMN "switchyard_eol";
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "web_staging"."hourly__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "web_staging"."hourly__next" ATTACH PARTITION "web_staging"."hourly_3"
    FOR VALUES FROM (TIMESTAMP '2026-03-01 02:00:00.000000') TO (TIMESTAMP '2026-03-01 03:00:00.000000');

-- daily: its last switch moves the batch in whole
-- The table's batch goes in whole, in the transaction of its last switch: readers see the
-- table before it or after it, never a mix. The lock is held already: the adapter takes it
-- before it reads the table's partitions, in attempts of a second at most, so that readers
-- never queue long behind its waiting request; it holds them off only for the statements
-- below, which change catalog entries and move no rows. Here it is granted at once.
LOCK TABLE "web"."daily" IN ACCESS EXCLUSIVE MODE;
ALTER TABLE "web_staging"."daily__next" DETACH PARTITION "web_staging"."daily_1";
ALTER TABLE "web_staging"."daily_1" RENAME TO "daily_20260301_20260301";
ALTER TABLE "web_staging"."daily_20260301_20260301" SET SCHEMA "web";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "web"."daily" ATTACH PARTITION "web"."daily_20260301_20260301" FOR VALUES FROM (DATE '2026-03-01') TO (DATE '2026-03-02');
ALTER TABLE "web_staging"."daily__next" DETACH PARTITION "web_staging"."daily_2";
ALTER TABLE "web_staging"."daily_2" RENAME TO "daily_20260302_20260302";
ALTER TABLE "web_staging"."daily_20260302_20260302" SET SCHEMA "web";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "web"."daily" ATTACH PARTITION "web"."daily_20260302_20260302" FOR VALUES FROM (DATE '2026-03-02') TO (DATE '2026-03-03');
DROP TABLE "web_staging"."daily__next";

-- hourly: its last switch moves the batch in whole
-- The table's batch goes in whole, in the transaction of its last switch: readers see the
-- table before it or after it, never a mix. The lock is held already: the adapter takes it
-- before it reads the table's partitions, in attempts of a second at most, so that readers
-- never queue long behind its waiting request; it holds them off only for the statements
-- below, which change catalog entries and move no rows. Here it is granted at once.
LOCK TABLE "web"."hourly" IN ACCESS EXCLUSIVE MODE;
ALTER TABLE "web_staging"."hourly__next" DETACH PARTITION "web_staging"."hourly_1";
ALTER TABLE "web_staging"."hourly_1" RENAME TO "hourly_20260301000000_20260301005959999000";
ALTER TABLE "web_staging"."hourly_20260301000000_20260301005959999000" SET SCHEMA "web";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "web"."hourly" ATTACH PARTITION "web"."hourly_20260301000000_20260301005959999000" FOR VALUES FROM (TIMESTAMP '2026-03-01 00:00:00.000000') TO (TIMESTAMP '2026-03-01 01:00:00.000000');
ALTER TABLE "web_staging"."hourly__next" DETACH PARTITION "web_staging"."hourly_2";
ALTER TABLE "web_staging"."hourly_2" RENAME TO "hourly_20260301010000_20260301015959999000";
ALTER TABLE "web_staging"."hourly_20260301010000_20260301015959999000" SET SCHEMA "web";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "web"."hourly" ATTACH PARTITION "web"."hourly_20260301010000_20260301015959999000" FOR VALUES FROM (TIMESTAMP '2026-03-01 01:00:00.000000') TO (TIMESTAMP '2026-03-01 02:00:00.000000');
ALTER TABLE "web_staging"."hourly__next" DETACH PARTITION "web_staging"."hourly_3";
ALTER TABLE "web_staging"."hourly_3" RENAME TO "hourly_20260301020000_20260301025959999000";
ALTER TABLE "web_staging"."hourly_20260301020000_20260301025959999000" SET SCHEMA "web";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "web"."hourly" ATTACH PARTITION "web"."hourly_20260301020000_20260301025959999000" FOR VALUES FROM (TIMESTAMP '2026-03-01 02:00:00.000000') TO (TIMESTAMP '2026-03-01 03:00:00.000000');
DROP TABLE "web_staging"."hourly__next";

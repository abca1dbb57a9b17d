-- Switchyard load plan: spec tpch, 3 streams, target postgres, schema tpch
-- objects
-- Objects a load needs, created only when missing: safe on every run.
CREATE SCHEMA IF NOT EXISTS "tpch";
CREATE SCHEMA IF NOT EXISTS "tpch_staging";
CREATE SCHEMA IF NOT EXISTS "switchyard";
-- NOT NULL unless the spec declares the column nullable (a partition key never is: a
-- partition's constraint includes "key IS NOT NULL", and staging tables copy these
-- definitions, so ATTACH can prove the bound without a scan). A varchar(n) column is text
-- with a named length CHECK: varchar(n) would cut excess trailing spaces without an error.
CREATE TABLE IF NOT EXISTS "tpch"."region" (
    "r_regionkey" integer NOT NULL,
    "r_name" char(25) NOT NULL,
    "r_comment" text NOT NULL,
    CONSTRAINT "r_comment_length" CHECK (octet_length("r_comment") <= 152 OR char_length("r_comment") <= 152)
);
-- NOT NULL unless the spec declares the column nullable (a partition key never is: a
-- partition's constraint includes "key IS NOT NULL", and staging tables copy these
-- definitions, so ATTACH can prove the bound without a scan). A varchar(n) column is text
-- with a named length CHECK: varchar(n) would cut excess trailing spaces without an error.
CREATE TABLE IF NOT EXISTS "tpch"."orders" (
    "o_orderkey" bigint NOT NULL,
    "o_custkey" bigint NOT NULL,
    "o_orderstatus" char(1) NOT NULL,
    "o_totalprice" numeric(15,2) NOT NULL,
    "o_orderdate" date NOT NULL,
    "o_orderpriority" char(15) NOT NULL,
    "o_clerk" char(15) NOT NULL,
    "o_shippriority" integer NOT NULL,
    "o_comment" text NOT NULL,
    CONSTRAINT "o_comment_length" CHECK (octet_length("o_comment") <= 79 OR char_length("o_comment") <= 79)
) PARTITION BY RANGE ("o_orderkey");
-- NOT NULL unless the spec declares the column nullable (a partition key never is: a
-- partition's constraint includes "key IS NOT NULL", and staging tables copy these
-- definitions, so ATTACH can prove the bound without a scan). A varchar(n) column is text
-- with a named length CHECK: varchar(n) would cut excess trailing spaces without an error.
CREATE TABLE IF NOT EXISTS "tpch"."lineitem" (
    "l_orderkey" bigint NOT NULL,
    "l_partkey" bigint NOT NULL,
    "l_suppkey" bigint NOT NULL,
    "l_linenumber" integer NOT NULL,
    "l_quantity" numeric(15,2) NOT NULL,
    "l_extendedprice" numeric(15,2) NOT NULL,
    "l_discount" numeric(15,2) NOT NULL,
    "l_tax" numeric(15,2) NOT NULL,
    "l_returnflag" char(1) NOT NULL,
    "l_linestatus" char(1) NOT NULL,
    "l_shipdate" date NOT NULL,
    "l_commitdate" date NOT NULL,
    "l_receiptdate" date NOT NULL,
    "l_shipinstruct" char(25) NOT NULL,
    "l_shipmode" char(10) NOT NULL,
    "l_comment" text NOT NULL,
    CONSTRAINT "l_comment_length" CHECK (octet_length("l_comment") <= 44 OR char_length("l_comment") <= 44)
) PARTITION BY RANGE ("l_orderkey");
-- The unique index of region: the spec's `unique` columns (r_regionkey).
-- Each stream's staging table gets the same index during validation, where a duplicate
-- fails its build; ATTACH PARTITION then adopts the partition's index instead of building
-- one. On a table that already has partitions this builds their indexes once.
CREATE UNIQUE INDEX IF NOT EXISTS "region_unique"
    ON "tpch"."region" ("r_regionkey");
-- The unique index of orders: the spec's `unique` columns (o_orderkey).
-- Each stream's staging table gets the same index during validation, where a duplicate
-- fails its build; ATTACH PARTITION then adopts the partition's index instead of building
-- one. On a table that already has partitions this builds their indexes once.
CREATE UNIQUE INDEX IF NOT EXISTS "orders_unique"
    ON "tpch"."orders" ("o_orderkey");
-- The unique index of lineitem: the spec's `unique` columns (l_orderkey, l_linenumber).
-- Each stream's staging table gets the same index during validation, where a duplicate
-- fails its build; ATTACH PARTITION then adopts the partition's index instead of building
-- one. On a table that already has partitions this builds their indexes once.
CREATE UNIQUE INDEX IF NOT EXISTS "lineitem_unique"
    ON "tpch"."lineitem" ("l_orderkey", "l_linenumber");
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

-- region_1: region/region.1.tbl, loaded whole
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "tpch_staging"."region_1";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "tpch_staging"."region_1" (
    LIKE "tpch"."region" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "region_1_eol" CHECK ("switchyard_eol" = '')
);
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "tpch_staging"."region_1"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "region_1_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "tpch_staging"."region_1";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "tpch_staging"."region_1" ("r_regionkey", "r_name", "r_comment", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "tpch_staging"."region_1" DROP COLUMN "switchyard_eol";
-- The spec's unique columns of region, checked on the loaded staging table: building a
-- unique index sorts the rows and fails at the first duplicate. It is the index the target's
-- table has (setup.sql).
-- IF NOT EXISTS: a retried validation finds the index an earlier attempt built.
CREATE UNIQUE INDEX IF NOT EXISTS "region_1_unique"
    ON "tpch_staging"."region_1" ("r_regionkey");
-- Small unpartitioned tables are replaced whole, in one transaction.
SET LOCAL lock_timeout = '60s';
-- DELETE, not TRUNCATE: a transaction whose snapshot is older than this one would find a
-- truncated table empty (https://www.postgresql.org/docs/current/mvcc-caveats.html).
DELETE FROM "tpch"."region";
INSERT INTO "tpch"."region" ("r_regionkey", "r_name", "r_comment")
    SELECT "r_regionkey", "r_name", "r_comment" FROM "tpch_staging"."region_1";
DROP TABLE "tpch_staging"."region_1";

-- orders_1: orders/orders.1.tbl, keys 1..20000
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "tpch_staging"."orders_1";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "tpch_staging"."orders_1" (
    LIKE "tpch"."orders" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "orders_1_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "tpch_staging"."orders_1"
    ADD CONSTRAINT "orders_1_range"
    CHECK ("o_orderkey" IS NOT NULL AND "o_orderkey" >= 1 AND "o_orderkey" < 20001);
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "tpch_staging"."orders_1"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "orders_1_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "tpch_staging"."orders_1";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "tpch_staging"."orders_1" ("o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice", "o_orderdate", "o_orderpriority", "o_clerk", "o_shippriority", "o_comment", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "tpch_staging"."orders_1" DROP COLUMN "switchyard_eol";
-- The spec's unique columns of orders, checked on the loaded staging table: building a
-- unique index sorts the rows and fails at the first duplicate. It is the index the target's
-- table has (setup.sql), so ATTACH PARTITION adopts it instead of building one.
-- IF NOT EXISTS: a retried validation finds the index an earlier attempt built.
CREATE UNIQUE INDEX IF NOT EXISTS "orders_1_20000_unique"
    ON "tpch_staging"."orders_1" ("o_orderkey");
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "tpch_staging"."orders__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "tpch_staging"."orders__next" ATTACH PARTITION "tpch_staging"."orders_1"
    FOR VALUES FROM (1) TO (20001);

-- orders_2: orders/orders.2.tbl, keys 20001..40000
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "tpch_staging"."orders_2";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "tpch_staging"."orders_2" (
    LIKE "tpch"."orders" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "orders_2_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "tpch_staging"."orders_2"
    ADD CONSTRAINT "orders_2_range"
    CHECK ("o_orderkey" IS NOT NULL AND "o_orderkey" >= 20001 AND "o_orderkey" < 40001);
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "tpch_staging"."orders_2"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "orders_2_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "tpch_staging"."orders_2";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "tpch_staging"."orders_2" ("o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice", "o_orderdate", "o_orderpriority", "o_clerk", "o_shippriority", "o_comment", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "tpch_staging"."orders_2" DROP COLUMN "switchyard_eol";
-- The spec's unique columns of orders, checked on the loaded staging table: building a
-- unique index sorts the rows and fails at the first duplicate. It is the index the target's
-- table has (setup.sql), so ATTACH PARTITION adopts it instead of building one.
-- IF NOT EXISTS: a retried validation finds the index an earlier attempt built.
CREATE UNIQUE INDEX IF NOT EXISTS "orders_20001_40000_unique"
    ON "tpch_staging"."orders_2" ("o_orderkey");
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "tpch_staging"."orders__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "tpch_staging"."orders__next" ATTACH PARTITION "tpch_staging"."orders_2"
    FOR VALUES FROM (20001) TO (40001);

-- orders_3: orders/orders.3.tbl, keys 40001..60000
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "tpch_staging"."orders_3";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "tpch_staging"."orders_3" (
    LIKE "tpch"."orders" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "orders_3_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "tpch_staging"."orders_3"
    ADD CONSTRAINT "orders_3_range"
    CHECK ("o_orderkey" IS NOT NULL AND "o_orderkey" >= 40001 AND "o_orderkey" < 60001);
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "tpch_staging"."orders_3"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "orders_3_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "tpch_staging"."orders_3";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "tpch_staging"."orders_3" ("o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice", "o_orderdate", "o_orderpriority", "o_clerk", "o_shippriority", "o_comment", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "tpch_staging"."orders_3" DROP COLUMN "switchyard_eol";
-- The spec's unique columns of orders, checked on the loaded staging table: building a
-- unique index sorts the rows and fails at the first duplicate. It is the index the target's
-- table has (setup.sql), so ATTACH PARTITION adopts it instead of building one.
-- IF NOT EXISTS: a retried validation finds the index an earlier attempt built.
CREATE UNIQUE INDEX IF NOT EXISTS "orders_40001_60000_unique"
    ON "tpch_staging"."orders_3" ("o_orderkey");
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "tpch_staging"."orders__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "tpch_staging"."orders__next" ATTACH PARTITION "tpch_staging"."orders_3"
    FOR VALUES FROM (40001) TO (60001);

-- lineitem_1: lineitem/lineitem.1.tbl, keys 1..20000
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "tpch_staging"."lineitem_1";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "tpch_staging"."lineitem_1" (
    LIKE "tpch"."lineitem" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "lineitem_1_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "tpch_staging"."lineitem_1"
    ADD CONSTRAINT "lineitem_1_range"
    CHECK ("l_orderkey" IS NOT NULL AND "l_orderkey" >= 1 AND "l_orderkey" < 20001);
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "tpch_staging"."lineitem_1"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "lineitem_1_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "tpch_staging"."lineitem_1";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "tpch_staging"."lineitem_1" ("l_orderkey", "l_partkey", "l_suppkey", "l_linenumber", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate", "l_commitdate", "l_receiptdate", "l_shipinstruct", "l_shipmode", "l_comment", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "tpch_staging"."lineitem_1" DROP COLUMN "switchyard_eol";
-- The spec's unique columns of lineitem, checked on the loaded staging table: building a
-- unique index sorts the rows and fails at the first duplicate. It is the index the target's
-- table has (setup.sql), so ATTACH PARTITION adopts it instead of building one.
-- IF NOT EXISTS: a retried validation finds the index an earlier attempt built.
CREATE UNIQUE INDEX IF NOT EXISTS "lineitem_1_20000_unique"
    ON "tpch_staging"."lineitem_1" ("l_orderkey", "l_linenumber");
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "tpch_staging"."lineitem__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "tpch_staging"."lineitem__next" ATTACH PARTITION "tpch_staging"."lineitem_1"
    FOR VALUES FROM (1) TO (20001);

-- lineitem_2: lineitem/lineitem.2.tbl, keys 20001..40000
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "tpch_staging"."lineitem_2";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "tpch_staging"."lineitem_2" (
    LIKE "tpch"."lineitem" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "lineitem_2_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "tpch_staging"."lineitem_2"
    ADD CONSTRAINT "lineitem_2_range"
    CHECK ("l_orderkey" IS NOT NULL AND "l_orderkey" >= 20001 AND "l_orderkey" < 40001);
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "tpch_staging"."lineitem_2"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "lineitem_2_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "tpch_staging"."lineitem_2";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "tpch_staging"."lineitem_2" ("l_orderkey", "l_partkey", "l_suppkey", "l_linenumber", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate", "l_commitdate", "l_receiptdate", "l_shipinstruct", "l_shipmode", "l_comment", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "tpch_staging"."lineitem_2" DROP COLUMN "switchyard_eol";
-- The spec's unique columns of lineitem, checked on the loaded staging table: building a
-- unique index sorts the rows and fails at the first duplicate. It is the index the target's
-- table has (setup.sql), so ATTACH PARTITION adopts it instead of building one.
-- IF NOT EXISTS: a retried validation finds the index an earlier attempt built.
CREATE UNIQUE INDEX IF NOT EXISTS "lineitem_20001_40000_unique"
    ON "tpch_staging"."lineitem_2" ("l_orderkey", "l_linenumber");
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "tpch_staging"."lineitem__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "tpch_staging"."lineitem__next" ATTACH PARTITION "tpch_staging"."lineitem_2"
    FOR VALUES FROM (20001) TO (40001);

-- lineitem_3: lineitem/lineitem.3.tbl, keys 40001..60000
-- A failed earlier attempt's staging table is replaced, never appended to (also when an
-- earlier attempt of the group's switch had attached it to the table's next version).
DROP TABLE IF EXISTS "tpch_staging"."lineitem_3";
-- The target table as it is, not as the spec first made it: its columns, types, nullability,
-- defaults, CHECK constraints (the length CHECKs of varchar columns, same names, and a DBA's),
-- storage and compression, so that ATTACH PARTITION accepts the table (setup has checked that
-- the target's columns are what the spec loads). Plus one trailing column that takes the
-- empty field after each line's final delimiter; it is dropped once loaded.
CREATE TABLE "tpch_staging"."lineitem_3" (
    LIKE "tpch"."lineitem" INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED
        INCLUDING STORAGE INCLUDING COMPRESSION,
    -- Must stay empty: a line with one field too many and no final delimiter fails here.
    "switchyard_eol" text NOT NULL CONSTRAINT "lineitem_3_eol" CHECK ("switchyard_eol" = '')
);
-- Exactly the partition's bound (FROM lower TO upper + one unit of the key: 1, 1 day or
-- 1 microsecond), so that ATTACH PARTITION proves the bound from this constraint and skips
-- its validation scan. Date and timestamp bounds are typed literals (DATE '...',
-- TIMESTAMP '...') of the key's own type: the proof compares constants of one type. The
-- partition's constraint also says the key IS NOT NULL, and a CHECK passes on NULL: where the
-- target's key column allows NULL (a DBA's table), only the CHECK's own IS NOT NULL proves it.
ALTER TABLE "tpch_staging"."lineitem_3"
    ADD CONSTRAINT "lineitem_3_range"
    CHECK ("l_orderkey" IS NOT NULL AND "l_orderkey" >= 40001 AND "l_orderkey" < 60001);
-- A retried load may find the trailing column already dropped: the earlier attempt
-- committed but its process died before the scheduler heard of it. Putting the column
-- back (a no-op on a fresh table) lets the retry reload from scratch instead of failing.
ALTER TABLE "tpch_staging"."lineitem_3"
    ADD COLUMN IF NOT EXISTS "switchyard_eol" text NOT NULL DEFAULT ''
    CONSTRAINT "lineitem_3_eol" CHECK ("switchyard_eol" = '');
-- TRUNCATE in the loading transaction is what makes COPY ... FREEZE legal (the table
-- is new in this transaction), and with wal_level=minimal it also skips WAL.
TRUNCATE "tpch_staging"."lineitem_3";
-- Every field taken literally: the client doubles each backslash while streaming, so COPY
-- sees no escape, no \N (NULL) and no end-of-data marker. No field can be NULL here (the
-- spec gives no NULL marker, or no nullable column). targets/postgres/copy_format.py says how and why.
COPY "tpch_staging"."lineitem_3" ("l_orderkey", "l_partkey", "l_suppkey", "l_linenumber", "l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate", "l_commitdate", "l_receiptdate", "l_shipinstruct", "l_shipmode", "l_comment", "switchyard_eol")
    FROM STDIN (FORMAT text, DELIMITER '|', ENCODING 'UTF8', FREEZE);
ALTER TABLE "tpch_staging"."lineitem_3" DROP COLUMN "switchyard_eol";
-- The spec's unique columns of lineitem, checked on the loaded staging table: building a
-- unique index sorts the rows and fails at the first duplicate. It is the index the target's
-- table has (setup.sql), so ATTACH PARTITION adopts it instead of building one.
-- IF NOT EXISTS: a retried validation finds the index an earlier attempt built.
CREATE UNIQUE INDEX IF NOT EXISTS "lineitem_40001_60000_unique"
    ON "tpch_staging"."lineitem_3" ("l_orderkey", "l_linenumber");
-- A stream's switch: its validated staging table becomes a partition of the table's next
-- version (a partitioned table in the staging schema, made by setup like the target). No
-- reader of the target sees it yet: the table's last switch moves the whole next version in
-- (commit_table.sql), in the same transaction as its own attach.
SET LOCAL lock_timeout = '60s';
-- The table's switches take turns here, so the last of them sees all the others' attaches.
LOCK TABLE "tpch_staging"."lineitem__next" IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE "tpch_staging"."lineitem__next" ATTACH PARTITION "tpch_staging"."lineitem_3"
    FOR VALUES FROM (40001) TO (60001);

-- orders: its last switch moves the batch in whole
-- The table's batch goes in whole, in the transaction of its last switch: readers see the
-- table before it or after it, never a mix. The lock is held already: the adapter takes it
-- before it reads the table's partitions, in attempts of a second at most, so that readers
-- never queue long behind its waiting request; it holds them off only for the statements
-- below, which change catalog entries and move no rows. Here it is granted at once.
LOCK TABLE "tpch"."orders" IN ACCESS EXCLUSIVE MODE;
ALTER TABLE "tpch_staging"."orders__next" DETACH PARTITION "tpch_staging"."orders_1";
ALTER TABLE "tpch_staging"."orders_1" RENAME TO "orders_1_20000";
ALTER TABLE "tpch_staging"."orders_1_20000" SET SCHEMA "tpch";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "tpch"."orders" ATTACH PARTITION "tpch"."orders_1_20000" FOR VALUES FROM (1) TO (20001);
ALTER TABLE "tpch_staging"."orders__next" DETACH PARTITION "tpch_staging"."orders_2";
ALTER TABLE "tpch_staging"."orders_2" RENAME TO "orders_20001_40000";
ALTER TABLE "tpch_staging"."orders_20001_40000" SET SCHEMA "tpch";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "tpch"."orders" ATTACH PARTITION "tpch"."orders_20001_40000" FOR VALUES FROM (20001) TO (40001);
ALTER TABLE "tpch_staging"."orders__next" DETACH PARTITION "tpch_staging"."orders_3";
ALTER TABLE "tpch_staging"."orders_3" RENAME TO "orders_40001_60000";
ALTER TABLE "tpch_staging"."orders_40001_60000" SET SCHEMA "tpch";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "tpch"."orders" ATTACH PARTITION "tpch"."orders_40001_60000" FOR VALUES FROM (40001) TO (60001);
DROP TABLE "tpch_staging"."orders__next";

-- lineitem: its last switch moves the batch in whole
-- The table's batch goes in whole, in the transaction of its last switch: readers see the
-- table before it or after it, never a mix. The lock is held already: the adapter takes it
-- before it reads the table's partitions, in attempts of a second at most, so that readers
-- never queue long behind its waiting request; it holds them off only for the statements
-- below, which change catalog entries and move no rows. Here it is granted at once.
LOCK TABLE "tpch"."lineitem" IN ACCESS EXCLUSIVE MODE;
ALTER TABLE "tpch_staging"."lineitem__next" DETACH PARTITION "tpch_staging"."lineitem_1";
ALTER TABLE "tpch_staging"."lineitem_1" RENAME TO "lineitem_1_20000";
ALTER TABLE "tpch_staging"."lineitem_1_20000" SET SCHEMA "tpch";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "tpch"."lineitem" ATTACH PARTITION "tpch"."lineitem_1_20000" FOR VALUES FROM (1) TO (20001);
ALTER TABLE "tpch_staging"."lineitem__next" DETACH PARTITION "tpch_staging"."lineitem_2";
ALTER TABLE "tpch_staging"."lineitem_2" RENAME TO "lineitem_20001_40000";
ALTER TABLE "tpch_staging"."lineitem_20001_40000" SET SCHEMA "tpch";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "tpch"."lineitem" ATTACH PARTITION "tpch"."lineitem_20001_40000" FOR VALUES FROM (20001) TO (40001);
ALTER TABLE "tpch_staging"."lineitem__next" DETACH PARTITION "tpch_staging"."lineitem_3";
ALTER TABLE "tpch_staging"."lineitem_3" RENAME TO "lineitem_40001_60000";
ALTER TABLE "tpch_staging"."lineitem_40001_60000" SET SCHEMA "tpch";
-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "tpch"."lineitem" ATTACH PARTITION "tpch"."lineitem_40001_60000" FOR VALUES FROM (40001) TO (60001);
DROP TABLE "tpch_staging"."lineitem__next";

SET LOCAL lock_timeout = '1000ms';

LOCK TABLE "sales"."orders" IN ACCESS EXCLUSIVE MODE;

SET LOCAL lock_timeout = '60s';

SELECT to_regclass(%s) IS NULL AND (%s OR to_regclass(%s) IS NULL)
-- parameters: ('"sales_archive"."orders_b1"', True, '"sales"."orders_b1"');

SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = to_regclass(%s) ORDER BY 1
-- parameters: ('"sales"."orders_b1"',);

SELECT to_regclass(%s) IS NULL AND (%s OR to_regclass(%s) IS NULL)
-- parameters: ('"sales_archive"."orders_b1_unique"', True, '"sales"."orders_b1_unique"');

-- The table's batch goes in whole, in the transaction of its last switch: readers see the
-- table before it or after it, never a mix. The lock is held already: the adapter takes it
-- before it reads the table's partitions, in attempts of a second at most, so that readers
-- never queue long behind its waiting request; it holds them off only for the statements
-- below, which change catalog entries and move no rows. Here it is granted at once.
LOCK TABLE "sales"."orders" IN ACCESS EXCLUSIVE MODE;

ALTER TABLE "sales_staging"."orders__next" DETACH PARTITION "sales_staging"."orders_1";

ALTER TABLE "sales_staging"."orders_1" RENAME TO "orders_1_20000";

ALTER TABLE "sales_staging"."orders_1_20000" SET SCHEMA "sales";

-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "sales"."orders" ATTACH PARTITION "sales"."orders_1_20000" FOR VALUES FROM (1) TO (20001);

ALTER TABLE "sales_staging"."orders__next" DETACH PARTITION "sales_staging"."orders_2";

ALTER TABLE "sales_staging"."orders_2" RENAME TO "orders_20001_40000";

ALTER TABLE "sales_staging"."orders_20001_40000" SET SCHEMA "sales";

-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "sales"."orders" ATTACH PARTITION "sales"."orders_20001_40000" FOR VALUES FROM (20001) TO (40001);

ALTER TABLE "sales_staging"."orders__next" DETACH PARTITION "sales_staging"."orders_3";

ALTER TABLE "sales_staging"."orders_3" RENAME TO "orders_40001_60000";

ALTER TABLE "sales_staging"."orders_40001_60000" SET SCHEMA "sales";

-- The bound the stream's switch attached it with; its range CHECK lets ATTACH skip the scan,
-- and the indexes the switch built from the target's are attached, not built.
ALTER TABLE "sales"."orders" ATTACH PARTITION "sales"."orders_40001_60000" FOR VALUES FROM (40001) TO (60001);

DROP TABLE "sales_staging"."orders__next";

CREATE SCHEMA IF NOT EXISTS "sales_archive";

-- Retention (keep: 3): orders_b1 falls out of the window.
ALTER TABLE "sales"."orders" DETACH PARTITION "sales"."orders_b1";

ALTER TABLE "sales"."orders_b1" SET SCHEMA "sales_archive";

DELETE FROM "switchyard"."partition_batches" WHERE target_schema = %s AND table_name = %s AND partition_name = ANY(%s)
-- parameters: ('sales', 'orders', ['orders_b1', 'orders_1_20000', 'orders_20001_40000', 'orders_40001_60000']);

INSERT INTO "switchyard"."partition_batches" (target_schema, table_name, partition_name, batch, key_min, key_max, rows_planned, run, switched_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now())
-- parameters: ('sales', 'orders', 'orders_1_20000', 'b4', '1', '20000', 5000, 'dag/run-4');

INSERT INTO "switchyard"."partition_batches" (target_schema, table_name, partition_name, batch, key_min, key_max, rows_planned, run, switched_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now())
-- parameters: ('sales', 'orders', 'orders_20001_40000', 'b4', '20001', '40000', 5000, 'dag/run-4');

INSERT INTO "switchyard"."partition_batches" (target_schema, table_name, partition_name, batch, key_min, key_max, rows_planned, run, switched_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now())
-- parameters: ('sales', 'orders', 'orders_40001_60000', 'b4', '40001', '60000', 5000, 'dag/run-4');

DELETE FROM "switchyard"."planned_partitions" WHERE target_schema = %s AND table_name = %s
-- parameters: ('sales', 'orders');

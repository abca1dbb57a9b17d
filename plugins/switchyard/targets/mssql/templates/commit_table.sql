-- {{ table }}: batch {{ batch }} goes in whole ({{ mode }} mode), in one transaction run by the
-- table's last switch once every stream of the batch is validated and staged. Readers see the
-- table before the batch or after it, never a mix: every statement below is part of one
-- transaction (XACT_ABORT: any error rolls all of it back, and the table stays as it was).
-- Locks. SWITCH, TRUNCATE and ALTER PARTITION FUNCTION take a schema-modification (Sch-M)
-- lock on the table (ALTER PARTITION FUNCTION on every table and index on the function), held
-- to COMMIT. Sch-M is compatible with no other lock, not even the Sch-S of a reader under READ
-- UNCOMMITTED or snapshot isolation, and a request that waits for it blocks every request for
-- the table that comes after it: readers queue behind the commit's waiting request, not only
-- behind its granted lock
-- (https://learn.microsoft.com/en-us/sql/relational-databases/sql-server-transaction-locking-and-row-versioning-guide#lock_compatibility).
-- Only SWITCH can wait at low priority, out of that queue (WAIT_AT_LOW_PRIORITY,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql#wait_at_low_priority);
-- TRUNCATE TABLE ... WITH (PARTITIONS) and ALTER PARTITION FUNCTION ... SPLIT / MERGE ask at
-- normal priority. So the table is taken by a SWITCH first: when the first step would be one
-- of those, an empty partition is switched out at low priority to an empty table that is then
-- dropped (no row and no partition changes). Once the first Sch-M is granted the table is this
-- transaction's: the later steps on it do not wait for readers again, and every step is
-- metadata only (empty partitions), so readers wait for the catalog changes alone. Without an
-- empty partition the first request is at normal priority; for it the whole transaction runs
-- under a short LOCK_TIMEOUT
-- ({{ commit_lock_wait_ms }} ms, https://learn.microsoft.com/en-us/sql/t-sql/statements/set-lock-timeout-transact-sql):
-- a normal-priority request behind a long reader gives up after that long (error 1222), the
-- transaction rolls back whole (nothing changed), the queue it held up moves on, and the
-- adapter runs the commit again after a pause ({{ commit_attempts }} attempts in all); a new
-- reader then waits at most {{ commit_lock_wait_ms }} ms per attempt while the request is
-- queued, plus the transaction's own catalog work.
-- In a deadlock with a reader this transaction is the one SQL Server rolls back (the session
-- of lower DEADLOCK_PRIORITY is the victim,
-- https://learn.microsoft.com/en-us/sql/t-sql/statements/set-deadlock-priority-transact-sql):
-- the reader's query goes on, and the adapter runs the whole transaction again (error 1205).
SET XACT_ABORT ON
SET LOCK_TIMEOUT {{ lit(commit_lock_wait_ms) }}
SET DEADLOCK_PRIORITY LOW
DECLARE @partition int
BEGIN TRY
    BEGIN TRANSACTION
{% include "_commit_steps.sql" %}
    COMMIT TRANSACTION
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION
    ;THROW
END CATCH;

-- One switch of a table at a time: a session-owned application lock per table, held until
-- the connection closes (after the commit, if this switch is the table's last). sp_getapplock
-- reports a lock it could not get in its return value (< 0), not as an error: hence THROW.
DECLARE @lock int
EXEC @lock = sp_getapplock @Resource = ?, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = ?
IF @lock < 0 THROW 51011, N'switchyard: another switch of this table held its commit lock too long', 1;

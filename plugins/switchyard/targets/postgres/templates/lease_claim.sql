-- Take the schema's run lease when it is free, already this run's, or lapsed; renew it when
-- it is this run's (the batch and acquired_at of a renewed lease stay). INSERT ... ON
-- CONFLICT DO UPDATE is atomic: of two runs claiming at once one inserts, the other waits on
-- the row lock and then sees the row, whose WHERE keeps it from taking a live lease.
INSERT INTO {{ qn(control_schema, "run_lease") }} AS l (target_schema, holder, batch, acquired_at, expires_at)
VALUES (%(schema)s, %(holder)s, %(batch)s, now(), now() + make_interval(secs => %(ttl)s))
ON CONFLICT (target_schema) DO UPDATE SET
    holder = EXCLUDED.holder,
    batch = CASE WHEN l.holder = EXCLUDED.holder THEN l.batch ELSE EXCLUDED.batch END,
    acquired_at = CASE WHEN l.holder = EXCLUDED.holder THEN l.acquired_at ELSE now() END,
    expires_at = EXCLUDED.expires_at
WHERE l.holder = EXCLUDED.holder OR l.expires_at < now();
-- Whoever holds it now, in the same transaction: this run, or the live run that keeps it.
SELECT holder, batch, acquired_at, expires_at FROM {{ qn(control_schema, "run_lease") }}
WHERE target_schema = %(schema)s;

-- SWITCH refuses an untrusted CHECK constraint. The load checked every row, so this finds
-- the constraint trusted and costs nothing; after a load that bypassed the check (another
-- tool, a TDS copy without check_constraints) it re-validates once, with one scan.
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID({{ nstr(qn(staging_schema, s.staging_table)) }}) AND name = {{ nstr(s.staging_table ~ "_range") }} AND is_not_trusted = 1)
    ALTER TABLE {{ qn(staging_schema, s.staging_table) }} WITH CHECK CHECK CONSTRAINT {{ q(s.staging_table ~ "_range") }};

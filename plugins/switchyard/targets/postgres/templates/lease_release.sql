{% if schema_literal %}
-- By hand, when the run that holds the lease is dead (or let it lapse).
{% elif unrenewed | default(false) %}
-- A holder that ended (its run failed or was marked failed): its row goes only if no step of it
-- renewed the lease since it was read (the same expiry).
{% else %}
-- The run's lease ends with its stats task; only the holder's own row goes.
{% endif %}
DELETE FROM {{ qn(control_schema, "run_lease") }}
WHERE target_schema = {% if schema_literal %}'{{ schema_literal }}'{% else %}%(schema)s AND holder = %(holder)s{% endif %}{% if unrenewed | default(false) %}
    AND expires_at = %(expires_at)s{% endif %};

{% if schema_literal %}
-- By hand, when the run that holds the lease is dead (or let it lapse).
{% else %}
-- The run's lease ends with its stats task; only the holder's own row goes.
{% endif %}
DELETE FROM {{ qn(control_schema, "run_lease") }}
WHERE target_schema = {% if schema_literal %}'{{ schema_literal }}'{% else %}%(schema)s AND holder = %(holder)s{% endif %};

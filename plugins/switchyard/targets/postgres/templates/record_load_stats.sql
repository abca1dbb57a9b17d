-- One row per (DAG, run, table, stream); a rerun of the run's stats task updates its rows.
INSERT INTO {{ qn(control_schema, "load_stats") }} ({% for c in columns %}{{ q(c) }}{{ ", " if not loop.last }}{% endfor %})
VALUES ({% for c in columns %}%s{{ ", " if not loop.last }}{% endfor %})
ON CONFLICT ({% for k in keys %}{{ q(k) }}{{ ", " if not loop.last }}{% endfor %}) DO UPDATE SET
{% for c in columns if c not in keys %}
    {{ q(c) }} = EXCLUDED.{{ q(c) }}{{ "," if not loop.last }}
{% endfor %}
;

-- One row per (DAG, run, table, stream); a rerun of the run's stats task updates its rows.
-- HOLDLOCK: without a key-range lock two sessions could both find the key missing and
-- both insert it; with it MERGE is a safe upsert. Values are bound parameters, never text.
MERGE {{ qn(control_schema, "load_stats") }} WITH (HOLDLOCK) AS t
USING (VALUES ({% for c in columns %}?{{ ", " if not loop.last }}{% endfor %}))
    AS s ({% for c in columns %}{{ q(c) }}{{ ", " if not loop.last }}{% endfor %})
ON {% for k in keys %}t.{{ q(k) }} = s.{{ q(k) }}{{ " AND " if not loop.last }}{% endfor %}

WHEN MATCHED THEN UPDATE SET
{% for c in columns if c not in keys %}
    t.{{ q(c) }} = s.{{ q(c) }}{{ "," if not loop.last }}
{% endfor %}
WHEN NOT MATCHED THEN INSERT ({% for c in columns %}{{ q(c) }}{{ ", " if not loop.last }}{% endfor %})
    VALUES ({% for c in columns %}s.{{ q(c) }}{{ ", " if not loop.last }}{% endfor %}); -- MERGE must end with ';' (error 10713)

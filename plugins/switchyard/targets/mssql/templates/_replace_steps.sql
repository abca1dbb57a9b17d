{#- An unpartitioned table's rows replaced by `source`'s, in the caller's transaction:
    switch_table.sql (the table's own switch, publish: table) and publish_batch.sql (every table
    of the batch in one transaction) include them. Context: table_name, columns, source, rows
    (the manifest's count, checked when given). #}
{% import "_identity.sql" as identity with context %}
    TRUNCATE TABLE {{ qn(schema, table_name) }}
    -- A column with the IDENTITY property takes the file's values, as the partitions moved into a
    -- partitioned table keep theirs: an INSERT may name it only under IDENTITY_INSERT (Msg 544
    -- otherwise), which the ALTER permission the TRUNCATE needs allows
    -- (https://learn.microsoft.com/en-us/sql/t-sql/statements/set-identity-insert-transact-sql).
    {{ identity.identity_insert(qn(schema, table_name), "ON") }}
    INSERT INTO {{ qn(schema, table_name) }} WITH (TABLOCK) ({% for c in columns %}{{ q(c.name) }}{{ ", " if not loop.last }}{% endfor %})
        SELECT {% for c in columns %}{{ q(c.name) }}{{ ", " if not loop.last }}{% endfor %} FROM {{ source }}
{% if rows is not none %}
    -- Validation counted the staging table; another count now means it changed since.
    IF @@ROWCOUNT <> {{ lit(rows) }} THROW 51012, N'{{ schema }}.{{ table_name }}: the rows to publish are not the {{ "{:,}".format(rows) }} the manifest says; nothing was published', 1
{% endif %}
    {{ identity.identity_insert(qn(schema, table_name), "OFF") }}
    -- DROP TABLE is transactional: the staging table goes with the commit that used it.
    DROP TABLE {{ source }}

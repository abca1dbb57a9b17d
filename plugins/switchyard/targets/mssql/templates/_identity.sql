{#- Macro: IDENTITY_INSERT for an unpartitioned table replaced whole (_replace_steps.sql), set only
    where the table has an IDENTITY column (SET on a table without one is Msg 8106). One table of
    a session at a time may have it ON (Msg 8107 for a second), and SET is not undone by a
    rollback: each CATCH sets it OFF again for the tables the transaction replaces, so that an
    attempt run again on the same session can set it ON. -#}
{% macro identity_insert(qname, state) -%}
IF OBJECTPROPERTY(OBJECT_ID({{ nstr(qname) }}), 'TableHasIdentity') = 1 SET IDENTITY_INSERT {{ qname }} {{ state }}
{%- endmacro %}

-- Pre-flight, 2 of 6: the function's boundary values in order, converted to the key's type
-- (sys.partition_range_values keeps them as sql_variant). RANGE LEFT: boundary_id k closes
-- partition k on its right end.
{% if as_text %}
-- As ISO 8601 text (style 126), every one of the type's 7 fractional digits: a driver reads a
-- {{ key_type }} value into a client value of 6 digits, which would move a boundary such as
-- .1234560 onto another value
-- (https://learn.microsoft.com/en-us/sql/t-sql/functions/cast-and-convert-transact-sql#date-and-time-styles).
SELECT rv.boundary_id, CONVERT(nvarchar(33), CONVERT({{ key_type }}, rv.[value]), 126) AS boundary
{% else %}
SELECT rv.boundary_id, CONVERT({{ key_type }}, rv.[value]) AS boundary
{% endif %}
FROM sys.partition_range_values AS rv
WHERE rv.function_id = ? AND rv.parameter_id = 1
ORDER BY rv.boundary_id;

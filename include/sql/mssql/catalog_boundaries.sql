-- Pre-flight, 2 of 6: the function's boundary values in order, converted to the key's type
-- (sys.partition_range_values keeps them as sql_variant). RANGE LEFT: boundary_id k closes
-- partition k on its right end.
SELECT rv.boundary_id, CONVERT({{ key_type }}, rv.[value]) AS boundary
FROM sys.partition_range_values AS rv
WHERE rv.function_id = ? AND rv.parameter_id = 1
ORDER BY rv.boundary_id;

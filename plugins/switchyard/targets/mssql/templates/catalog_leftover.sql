-- Pre-flight, for a partitioned table that is not there yet: the partition function and scheme
-- setup would create for it, by their names, if a table of that name dropped earlier left them
-- (DROP TABLE drops neither). Setup creates them only where missing, and the new table goes on
-- them as they are. Values are parameters.
SELECT N'function' AS kind, pf.name, pf.boundary_value_on_right, TYPE_NAME(pp.system_type_id) AS parameter_type,
       pp.scale
FROM sys.partition_functions AS pf
JOIN sys.partition_parameters AS pp ON pp.function_id = pf.function_id AND pp.parameter_id = 1
WHERE pf.name = ?
UNION ALL
SELECT N'scheme', ps.name, NULL, pf.name, NULL
FROM sys.partition_schemes AS ps
JOIN sys.partition_functions AS pf ON pf.function_id = ps.function_id
WHERE ps.name = ?;

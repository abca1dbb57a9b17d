-- Switchyard: server configuration for 8 load stream(s) on pinned ports
-- Layout from the server (sys.dm_os_nodes, sys.dm_os_schedulers):
--   4 node(s), 32 logical CPUs in 1 processor group(s) (group 0: 32):
--     node 0: memory node 0, group 0, CPUs 0-7 of the group (cpu_id 0-7), 8 scheduler(s)
--     node 1: memory node 1, group 0, CPUs 8-15 of the group (cpu_id 8-15), 8 scheduler(s)
--     node 2: memory node 2, group 0, CPUs 16-23 of the group (cpu_id 16-23), 8 scheduler(s)
--     node 3: memory node 3, group 0, CPUs 24-31 of the group (cpu_id 24-31), 8 scheduler(s)
--
-- Port-to-node mapping is a Windows setting of the instance, not T-SQL, and SQL Server on
-- Linux has none (it listens on one port): there, map several client ports to that one
-- (the docker-compose stack does) and rely on the scheduler guard alone.
-- Nothing here changes the instance's CPU affinity: it keeps all 32 CPUs.
--
-- 1. Ports: SQL Server Configuration Manager, SQL Server Network Configuration, Protocols for
--    <instance>, TCP/IP, IP Addresses, IPAll: TCP Port =
--    2000[0x1],2001[0x2],2002[0x4],2003[0x8]
--    and TCP Dynamic Ports = blank (delete any value, 0 included: with a dynamic port the
--    instance may listen elsewhere after a restart). Then restart the instance.
--    Each port names one node; streams are spread so that no node has more than it has
--    schedulers while another has room:
--      port 2000 -> node 0 (memory node 0, group 0, 8 scheduler(s)): streams 1, 5
--      port 2001 -> node 1 (memory node 1, group 0, 8 scheduler(s)): streams 2, 6
--      port 2002 -> node 2 (memory node 2, group 0, 8 scheduler(s)): streams 3, 7
--      port 2003 -> node 3 (memory node 3, group 0, 8 scheduler(s)): streams 4, 8
--    Switchyard's connection extras: {"base_port": 2000, "port_count": 4}
--    No node gets more streams than it has schedulers: with the scheduler guard each load
--    runs on a scheduler of its own.
--
--    The node ids above are the server's as it reports them now; a change of
--    its soft-NUMA configuration or CPU count renumbers them: read the layout again after one.
--
-- 2. After the restart, check: the nodes and their schedulers, the port each session came in
--    on, and instant file initialization (data files grow and are created without zeroing).
SELECT node_id, memory_node_id, processor_group, online_scheduler_count FROM sys.dm_os_nodes WHERE node_state_desc NOT LIKE N'%DAC%';
GO
SELECT softnuma_configuration_desc FROM sys.dm_os_sys_info;
GO
SELECT session_id, local_tcp_port FROM sys.dm_exec_connections;
GO
SELECT servicename, instant_file_initialization_enabled FROM sys.dm_server_services;
GO

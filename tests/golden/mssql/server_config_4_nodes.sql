-- Switchyard: server configuration for 4 pinned load ports (2 CPU(s) per node)
--
-- 1. Ports (Windows only; a Windows setting, not T-SQL): SQL Server Configuration Manager,
--    SQL Server Network Configuration, Protocols for <instance>, TCP/IP, IP Addresses, IPAll,
--    TCP Port =
--    2000[0x1],2001[0x2],2002[0x4],2003[0x8]
--    then restart the instance. Port base+i then serves soft-NUMA node i; Switchyard's
--    port map sends stream k to port 2000 + (k - 1) mod 4 (options base_port, port_count).
--    SQL Server on Linux listens on one port: there, map several client ports to it
--    (the docker-compose stack does) and rely on the scheduler guard instead.
--
-- 2. Soft-NUMA nodes of the given size (Windows registry, one key per node, then restart):
--    HKLM\SOFTWARE\Microsoft\Microsoft SQL Server\MSSQL<version>.<instance>\NodeConfiguration\Node0: CPUMask (QWORD) = 0x3, Group (DWORD) = 0
--    HKLM\SOFTWARE\Microsoft\Microsoft SQL Server\MSSQL<version>.<instance>\NodeConfiguration\Node1: CPUMask (QWORD) = 0xC, Group (DWORD) = 0
--    HKLM\SOFTWARE\Microsoft\Microsoft SQL Server\MSSQL<version>.<instance>\NodeConfiguration\Node2: CPUMask (QWORD) = 0x30, Group (DWORD) = 0
--    HKLM\SOFTWARE\Microsoft\Microsoft SQL Server\MSSQL<version>.<instance>\NodeConfiguration\Node3: CPUMask (QWORD) = 0xC0, Group (DWORD) = 0
--    With automatic soft-NUMA instead (2016+), the server picks the node size itself:
-- ALTER SERVER CONFIGURATION SET SOFTNUMA ON;

-- 3. Manual soft-NUMA replaces automatic soft-NUMA, so turn that off.
ALTER SERVER CONFIGURATION SET SOFTNUMA OFF;
GO
-- 4. The instance runs on exactly the CPUs the nodes cover (ALTER SERVER CONFIGURATION, 2008 R2+).
ALTER SERVER CONFIGURATION SET PROCESS AFFINITY CPU = 0 TO 7;
GO
-- 5. After the restart, check: one row per node, and which port each session came in on.
SELECT node_id, node_state_desc, online_scheduler_count FROM sys.dm_os_nodes WHERE node_state_desc <> N'ONLINE DAC';
GO
SELECT session_id, local_tcp_port FROM sys.dm_exec_connections;
GO

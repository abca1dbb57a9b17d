-- Switchyard: server configuration for 4 pinned load ports (2 CPU(s) per node)
--
-- Port-to-node mapping is a Windows setting of the instance, not T-SQL, and SQL Server on
-- Linux has none (it listens on one port): there, map several client ports to that one
-- (the docker-compose stack does) and rely on the scheduler guard instead.
--
-- 1. Ports: SQL Server Configuration Manager, SQL Server Network Configuration, Protocols for
--    <instance>, TCP/IP, IP Addresses, IPAll, TCP Port =
--    2000[0x1],2001[0x2],2002[0x4],2003[0x8]
--    then restart the instance. Port 2000 + i then serves soft-NUMA node i.
--    Switchyard sends stream k to port 2000 + (k - 1) mod 4: connection extras
--    {"base_port": 2000, "port_count": 4}.
--
-- 2. Soft-NUMA nodes, one per port (registry of the Windows server, one key per node; the
--    key is machine-wide; <nnn> is the version: 130 for 2016, 140, 150, 160 for 2022),
--    then restart:
--    HKLM\SOFTWARE\Microsoft\Microsoft SQL Server\<nnn>\NodeConfiguration\Node0: CPUMask (DWORD/QWORD) = 0x3, Group (DWORD) = 0
--    HKLM\SOFTWARE\Microsoft\Microsoft SQL Server\<nnn>\NodeConfiguration\Node1: CPUMask (DWORD/QWORD) = 0xC, Group (DWORD) = 0
--    HKLM\SOFTWARE\Microsoft\Microsoft SQL Server\<nnn>\NodeConfiguration\Node2: CPUMask (DWORD/QWORD) = 0x30, Group (DWORD) = 0
--    HKLM\SOFTWARE\Microsoft\Microsoft SQL Server\<nnn>\NodeConfiguration\Node3: CPUMask (DWORD/QWORD) = 0xC0, Group (DWORD) = 0
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

"""Server-side settings for pinned loads on SQL Server: ports mapped to soft-NUMA nodes.

The record runs gave every load stream its own TCP port and mapped each port to one
soft-NUMA node, so a stream's session (and its BULK INSERT or bulk copy) ran on that
node's CPUs. That mapping is a Windows setting of the instance (SQL Server Configuration
Manager, TCP/IP, IPAll, TCP Port: `2000[0x1],2001[0x2],...`, the bracket a bit mask of
NUMA nodes); SQL Server on Linux listens on one port (mssql-conf network.tcpport) and
has no per-port node affinity. These functions print what a DBA applies; nothing here
connects to a server.
"""
from __future__ import annotations


def node_mask(node: int) -> str:
    """The NUMA node affinity mask of one node (node 0 -> 0x1, node 5 -> 0x20)."""
    if not 0 <= node < 64:
        raise ValueError(f"node {node} is outside 0..63")
    return f"0x{1 << node:X}"


def tcp_port_value(nodes: int, base_port: int = 2000) -> str:
    """The Configuration Manager TCP Port value: port base+i listens for node i."""
    if not 1 <= nodes <= 64:
        raise ValueError("nodes must be 1..64")
    if not (0 < base_port and base_port + nodes - 1 < 65536):
        raise ValueError("ports must lie in 1..65535")
    return ",".join(f"{base_port + i}[{node_mask(i)}]" for i in range(nodes))


def cpu_mask(first_cpu: int, count: int) -> str:
    return f"0x{((1 << count) - 1) << first_cpu:X}"


def server_config(nodes: int, cpus_per_node: int = 1, base_port: int = 2000) -> str:
    """Everything a DBA sets for `nodes` pinned load streams, as one reviewable text."""
    if cpus_per_node < 1:
        raise ValueError("cpus_per_node must be at least 1")
    cpus = nodes * cpus_per_node
    lines = [
        f"-- Switchyard: server configuration for {nodes} pinned load ports ({cpus_per_node} CPU(s) per node)",
        "--",
        "-- 1. Ports (Windows only; a Windows setting, not T-SQL): SQL Server Configuration Manager,",
        "--    SQL Server Network Configuration, Protocols for <instance>, TCP/IP, IP Addresses, IPAll,",
        "--    TCP Port =",
        f"--    {tcp_port_value(nodes, base_port)}",
        "--    then restart the instance. Port base+i then serves soft-NUMA node i; Switchyard's",
        f"--    port map sends stream k to port {base_port} + (k - 1) mod {nodes} (options base_port, port_count).",
        "--    SQL Server on Linux listens on one port: there, map several client ports to it",
        "--    (the docker-compose stack does) and rely on the scheduler guard instead.",
        "--",
        "-- 2. Soft-NUMA nodes of the given size (Windows registry, one key per node, then restart):",
    ]
    for node in range(nodes):
        lines.append(f"--    HKLM\\SOFTWARE\\Microsoft\\Microsoft SQL Server\\MSSQL<version>.<instance>\\NodeConfiguration"
                     f"\\Node{node}: CPUMask (QWORD) = {cpu_mask(node * cpus_per_node, cpus_per_node)}, Group (DWORD) = 0")
    lines += [
        "--    With automatic soft-NUMA instead (2016+), the server picks the node size itself:",
        "-- ALTER SERVER CONFIGURATION SET SOFTNUMA ON;",
        "",
        "-- 3. Manual soft-NUMA replaces automatic soft-NUMA, so turn that off.",
        "ALTER SERVER CONFIGURATION SET SOFTNUMA OFF;",
        "GO",
        "-- 4. The instance runs on exactly the CPUs the nodes cover (ALTER SERVER CONFIGURATION, 2008 R2+).",
        f"ALTER SERVER CONFIGURATION SET PROCESS AFFINITY CPU = 0 TO {cpus - 1};",
        "GO",
        "-- 5. After the restart, check: one row per node, and which port each session came in on.",
        "SELECT node_id, node_state_desc, online_scheduler_count FROM sys.dm_os_nodes WHERE node_state_desc <> N'ONLINE DAC';",
        "GO",
        "SELECT session_id, local_tcp_port FROM sys.dm_exec_connections;",
        "GO",
    ]
    return "\n".join(lines) + "\n"

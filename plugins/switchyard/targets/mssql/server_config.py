"""Server-side settings for pinned loads on SQL Server: ports mapped to soft-NUMA nodes.

The record runs gave every load stream its own TCP port and mapped each port to one
soft-NUMA node, so a stream's session (and its BULK INSERT or bulk copy) ran on that
node's CPUs. That mapping is a Windows setting of the instance (SQL Server Configuration
Manager, TCP/IP, IPAll, TCP Port: `2000[0x1],2001[0x2],...`, the bracket a bit mask of
NUMA nodes; at most 64 nodes); SQL Server on Linux listens on one port (mssql-conf
network.tcpport) and has no per-port node affinity. These functions print what a DBA applies; nothing here
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


# Windows puts at most 64 logical processors in a processor group; a soft-NUMA node's
# CPUMask is relative to its Group.
GROUP_SIZE = 64


def node_cpus(node: int, cpus_per_node: int) -> tuple[int, str]:
    """(processor group, CPUMask within it) of a node, nodes filling the CPUs in order.

    Assumes full 64-processor groups (group g holds CPUs 64g..64g+63); Windows may form
    smaller, equal groups on some machines: check the groups (`coreinfo -g`) before applying.
    """
    group, offset = divmod(node * cpus_per_node, GROUP_SIZE)
    if offset + cpus_per_node > GROUP_SIZE:
        raise ValueError(f"node {node}'s {cpus_per_node} CPUs would straddle processor groups: "
                         f"use a CPU count per node that divides {GROUP_SIZE}")
    return group, cpu_mask(offset, cpus_per_node)


def server_config(nodes: int, cpus_per_node: int = 1, base_port: int = 2000, streams: int | None = None) -> str:
    """Everything a DBA sets for `nodes` pinned load ports, as one reviewable text."""
    if cpus_per_node < 1:
        raise ValueError("cpus_per_node must be at least 1")
    port_value = tcp_port_value(nodes, base_port)
    cpus = nodes * cpus_per_node
    lines = [
        f"-- Switchyard: server configuration for {nodes} pinned load ports ({cpus_per_node} CPU(s) per node)",
        "--",
        "-- Port-to-node mapping is a Windows setting of the instance, not T-SQL, and SQL Server on",
        "-- Linux has none (it listens on one port): there, map several client ports to that one",
        "-- (the docker-compose stack does) and rely on the scheduler guard instead.",
        "--",
        "-- 1. Ports: SQL Server Configuration Manager, SQL Server Network Configuration, Protocols for",
        "--    <instance>, TCP/IP, IP Addresses, IPAll, TCP Port =",
        f"--    {port_value}",
        f"--    then restart the instance. Port {base_port} + i then serves soft-NUMA node i.",
        f"--    Switchyard sends stream k to port {base_port} + (k - 1) mod {nodes}: connection extras",
        f'--    {{"base_port": {base_port}, "port_count": {nodes}}}.',
    ]
    if streams is not None and streams > nodes:
        lines.append(f"--    {streams} streams over {nodes} ports: streams {nodes + 1}..{streams} share the ports "
                     f"(and nodes) of streams 1..{streams - nodes}.")
    lines += [
        "--",
        "-- 2. Soft-NUMA nodes, one per port (registry of the Windows server, one key per node; the",
        "--    key is machine-wide; <nnn> is the version: 130 for 2016, 140, 150, 160 for 2022),",
        "--    then restart:",
    ]
    for node in range(nodes):
        group, mask = node_cpus(node, cpus_per_node)
        lines.append(f"--    HKLM\\SOFTWARE\\Microsoft\\Microsoft SQL Server\\<nnn>\\NodeConfiguration\\Node{node}: "
                     f"CPUMask (DWORD/QWORD) = {mask}, Group (DWORD) = {group}")
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

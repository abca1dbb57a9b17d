"""Server-side settings for pinned loads on SQL Server, from the server's real CPU layout.

The record runs gave every load stream a TCP port and mapped each port to a NUMA node, so a
stream's session (and its BULK INSERT or bulk copy) ran on that node's schedulers. That
mapping is a Windows setting of the instance (SQL Server Configuration Manager, TCP/IP,
IPAll, TCP Port: `2000[0x1],2001[0x2],...`, the bracket a bit mask of node ids, at most 64
nodes); SQL Server on Linux listens on one port and has no per-port node affinity.

Everything here starts from a layout: the nodes SQL Server itself reports
(`sys.dm_os_nodes`, `sys.dm_os_schedulers`: node ids, processor groups, CPUs, online
schedulers), read with LAYOUT_SQL on the server or passed by the user. Nothing is assumed
about how Windows forms processor groups (it builds them from whole NUMA nodes: 96 logical
CPUs in two nodes are two groups of 48, not 64 + 32), and nothing here shrinks the instance:
CPU affinity is emitted only when asked for, by CPU ids the layout holds.

The default maps one port to each node as the server has it (no soft-NUMA change, no
affinity change); streams are spread over the ports so that no node gets more streams than
it has schedulers, and the scheduler guard keeps each load on a scheduler of its own inside
its node. Soft-NUMA (one port per node of C CPUs, as the record runs did) is an explicit
choice. Nothing here connects to a server; the text is what a DBA reviews and applies.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

# Windows puts at most 64 logical processors in a processor group; SQL Server numbers CPUs
# group * 64 + the CPU's number in its group (sys.dm_os_schedulers.cpu_id: 0..47, 64..111 on
# two groups of 48), and a soft-NUMA node's CPUMask is relative to its Group.
GROUP_SIZE = 64
# A port's node mask has 64 bits: node ids 0..63.
MAX_NODES = 64

# The layout as SQL Server reports it, one JSON document (FOR JSON: 2016+). Run on the
# server and save the output (LAYOUT_COMMAND), then `plan --emit server-config --layout
# layout.json`; the adapter reads the same query live. FOR JSON hands a long document back
# cut into rows of about 2 KB (printed as lines): the reader joins them. The dedicated admin
# connection's node (ONLINE DAC) serves no user session: left out. `softnuma` is the server's
# soft-NUMA configuration (sys.dm_os_sys_info, 2016+: OFF, ON for automatic, MANUAL): under
# automatic soft-NUMA (2016+, on by default, for hardware nodes of more than 8 physical cores)
# the nodes listed are the soft nodes the server formed, each with the hardware node it sits
# on as memory_node_id, and the port-to-node map refers to those node ids
# (https://learn.microsoft.com/en-us/sql/database-engine/configure-windows/soft-numa-sql-server).
LAYOUT_SQL = """SELECT
    (SELECT i.softnuma_configuration_desc FROM sys.dm_os_sys_info AS i) AS softnuma,
    JSON_QUERY((SELECT n.node_id, n.memory_node_id, n.processor_group, n.cpu_affinity_mask,
                       n.online_scheduler_count
                FROM sys.dm_os_nodes AS n
                WHERE n.node_state_desc NOT LIKE N'%DAC%'
                ORDER BY n.node_id
                FOR JSON PATH)) AS nodes,
    JSON_QUERY((SELECT s.parent_node_id, s.scheduler_id, s.cpu_id
                FROM sys.dm_os_schedulers AS s
                WHERE s.status = N'VISIBLE ONLINE'
                ORDER BY s.scheduler_id
                FOR JSON PATH)) AS schedulers
FOR JSON PATH, WITHOUT_ARRAY_WRAPPER"""


LAYOUT_COMMAND = ("sqlcmd -S <server>,<port> -d master -h -1 -y 0 -i layout.sql -o layout.json   "
                  "(layout.sql: SET NOCOUNT ON; and the query)")


class LayoutError(ValueError):
    """The layout or the settings asked for cannot be laid out as pinned ports."""


def node_mask(node: int) -> str:
    """The NUMA node affinity mask of one node (node 0 -> 0x1, node 5 -> 0x20)."""
    if not 0 <= node < MAX_NODES:
        raise LayoutError(f"node {node} is outside 0..63: a port's node mask has 64 bits")
    return f"0x{1 << node:X}"


def cpu_mask(cpus: Iterable[int]) -> str:
    """The bit mask of CPU numbers within one processor group (CPUs 2 and 3 -> 0xC)."""
    value = 0
    for cpu in cpus:
        if not 0 <= cpu < GROUP_SIZE:
            raise LayoutError(f"CPU {cpu} is outside a processor group's 0..63")
        value |= 1 << cpu
    return f"0x{value:X}"


def ranges(values: Iterable[int]) -> str:
    """Sorted integers as T-SQL's `a TO b, c` ranges ([0, 1, 2, 5] -> '0 TO 2, 5')."""
    out, run = [], []
    for v in sorted(set(values)):
        if run and v == run[-1] + 1:
            run.append(v)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]} TO {run[-1]}")
        run = [v]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]} TO {run[-1]}")
    return ", ".join(out)


def _short_ranges(values: Iterable[int]) -> str:
    return ranges(values).replace(" TO ", "-")


@dataclass(frozen=True)
class Node:
    """One node as sys.dm_os_nodes reports it."""
    node_id: int
    memory_node_id: int          # the hardware NUMA node (soft-NUMA nodes share one)
    group: int                   # the Windows processor group
    cpus: tuple[int, ...]        # CPU numbers within the group
    schedulers: int              # online schedulers (VISIBLE ONLINE) serving user sessions

    @property
    def cpu_ids(self) -> tuple[int, ...]:
        """SQL Server's CPU ids (sys.dm_os_schedulers.cpu_id, PROCESS AFFINITY CPU)."""
        return tuple(self.group * GROUP_SIZE + c for c in self.cpus)


@dataclass(frozen=True)
class Layout:
    nodes: tuple[Node, ...]
    source: str
    softnuma: str | None = None     # the server's soft-NUMA configuration (OFF, ON, MANUAL), if read
    assumed: bool = False           # NODESxCPUS as given: node ids taken to be the hardware nodes

    @property
    def groups(self) -> dict[int, int]:
        """Processor group -> logical CPUs in it."""
        out: dict[int, int] = {}
        for n in self.nodes:
            out[n.group] = out.get(n.group, 0) + len(n.cpus)
        return dict(sorted(out.items()))

    @property
    def cpu_ids(self) -> tuple[int, ...]:
        return tuple(sorted(c for n in self.nodes for c in n.cpu_ids))

    def node(self, node_id: int) -> Node:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise LayoutError(f"the layout has no node {node_id}")

    def describe(self) -> list[str]:
        groups = self.groups
        lines = [f"{len(self.nodes)} node(s), {sum(groups.values())} logical CPUs in {len(groups)} processor "
                 f"group(s) ({', '.join(f'group {g}: {c}' for g, c in groups.items())})"
                 + (f", soft-NUMA {self.softnuma}" + (" (automatic: the nodes are the soft nodes the server "
                                                     "formed; memory node = hardware node)" if self.softnuma == "ON"
                                                     else "") if self.softnuma else "") + ":"]
        for n in self.nodes:
            lines.append(f"  node {n.node_id}: memory node {n.memory_node_id}, group {n.group}, CPUs "
                         f"{_short_ranges(n.cpus)} of the group (cpu_id {_short_ranges(n.cpu_ids)}), "
                         f"{n.schedulers} scheduler(s)")
        return lines


def _mask_bits(mask: int) -> tuple[int, ...]:
    mask &= (1 << 64) - 1  # bigint: a mask with bit 63 set comes back negative
    return tuple(i for i in range(64) if mask >> i & 1)


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise LayoutError(f"layout: {what} must be a whole number in {low}..{high}, not {value!r}")
    return value


def layout_from_json(data: Any, source: str = "the server (sys.dm_os_nodes, sys.dm_os_schedulers)") -> Layout:
    """A layout from LAYOUT_SQL's JSON (or the same document written by hand).

    `{"nodes": [{"node_id", "memory_node_id", "processor_group", "cpu_affinity_mask",
    "online_scheduler_count"}, ...], "schedulers": [{"parent_node_id", "scheduler_id",
    "cpu_id"}, ...]}`; a node may give `"cpus": [..]` (numbers within its group) instead of
    the mask. Where schedulers are given, a node's CPUs are those its online schedulers run
    on, which the affinity in force may narrow.
    """
    if isinstance(data, str):
        data = json.loads(data)
    if isinstance(data, list):
        data = {"nodes": data}
    if not isinstance(data, Mapping) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise LayoutError("layout: a JSON object with a non-empty list 'nodes' (what LAYOUT_SQL prints)")
    schedulers: dict[int, list[int]] = {}
    for s in data.get("schedulers") or []:
        node = _int(s.get("parent_node_id"), "schedulers[].parent_node_id", 0, 63)
        schedulers.setdefault(node, []).append(_int(s.get("cpu_id"), "schedulers[].cpu_id", 0, 64 * 64 - 1))
    nodes = []
    for raw in data["nodes"]:
        if not isinstance(raw, Mapping):
            raise LayoutError("layout: each node is an object")
        node_id = _int(raw.get("node_id"), "node_id", 0, 63)
        group = _int(raw.get("processor_group", 0), "processor_group", 0, 63)
        if "cpus" in raw:
            cpus = tuple(_int(c, f"node {node_id} cpus[]", 0, GROUP_SIZE - 1) for c in raw["cpus"])
        else:
            mask = raw.get("cpu_affinity_mask")
            if isinstance(mask, bool) or not isinstance(mask, int):
                raise LayoutError(f"layout: node {node_id} needs cpu_affinity_mask or cpus")
            cpus = _mask_bits(mask)
        if node_id in schedulers:
            ids = schedulers[node_id]
            if any(c // GROUP_SIZE != group for c in ids):
                raise LayoutError(f"layout: node {node_id}'s schedulers run on CPUs outside its group {group}")
            cpus = tuple(sorted(c % GROUP_SIZE for c in ids))
        if not cpus:
            raise LayoutError(f"layout: node {node_id} has no CPU")
        count = raw.get("online_scheduler_count")
        count = len(schedulers[node_id]) if node_id in schedulers else (
            len(cpus) if count is None else _int(count, "online_scheduler_count", 0, 64))
        nodes.append(Node(node_id=node_id, memory_node_id=_int(raw.get("memory_node_id", node_id),
                                                                "memory_node_id", 0, 63),
                          group=group, cpus=tuple(sorted(set(cpus))), schedulers=count))
    ids = [n.node_id for n in nodes]
    if len(set(ids)) != len(ids):
        raise LayoutError("layout: a node id appears twice")
    softnuma = data.get("softnuma")
    if softnuma is not None and softnuma not in ("OFF", "ON", "MANUAL"):
        raise LayoutError(f"layout: softnuma is OFF, ON or MANUAL (sys.dm_os_sys_info.softnuma_configuration_desc), "
                          f"not {softnuma!r}")
    taken: set[int] = set()
    for n in nodes:
        if taken & set(n.cpu_ids):
            raise LayoutError(f"layout: node {n.node_id} shares CPUs with another node")
        taken |= set(n.cpu_ids)
    return Layout(nodes=tuple(sorted(nodes, key=lambda n: n.node_id)), source=source, softnuma=softnuma)


_SHORTHAND = re.compile(r"^\s*(\d+)\s*[xX*]\s*(\d+)\s*$")


def assumed_layout(nodes: int, cpus_per_node: int) -> Layout:
    """`NxC`: N hardware NUMA nodes of C logical CPUs each, with node ids 0..N-1 and processor
    groups formed the way Windows forms them: whole nodes, at most 64 logical CPUs a group
    (2x48: two groups of 48). An assumption, said so in the output: a SQL Server 2016+ with
    more than 8 physical cores per node splits nodes itself (automatic soft-NUMA), so read
    the real layout with LAYOUT_SQL before applying anything."""
    if not 1 <= nodes <= MAX_NODES:
        raise LayoutError(f"layout {nodes}x{cpus_per_node}: 1..64 nodes")
    if not 1 <= cpus_per_node <= GROUP_SIZE:
        raise LayoutError(f"layout {nodes}x{cpus_per_node}: a NUMA node holds 1..64 logical CPUs "
                          "(Windows keeps a node inside one processor group)")
    out, group, used = [], 0, 0
    for node in range(nodes):
        if used + cpus_per_node > GROUP_SIZE:
            group, used = group + 1, 0
        out.append(Node(node_id=node, memory_node_id=node, group=group,
                        cpus=tuple(range(used, used + cpus_per_node)), schedulers=cpus_per_node))
        used += cpus_per_node
    return Layout(nodes=tuple(out), source=f"{nodes}x{cpus_per_node} as given (assumed: node ids 0..{nodes - 1} are "
                                           "the hardware nodes, groups of whole nodes; check against the layout "
                                           "query)", assumed=True)


def read_layout(value: str) -> Layout:
    """`--layout`: a JSON file (LAYOUT_SQL's output) or the shorthand NxC."""
    m = _SHORTHAND.match(value)
    if m:
        return assumed_layout(int(m.group(1)), int(m.group(2)))
    path = Path(value)
    if not path.is_file():
        raise LayoutError(f"--layout {value!r}: neither a layout file (the JSON that LAYOUT_SQL prints on the "
                          "server) nor NODESxCPUS such as 2x48")
    text = path.read_text(encoding="utf-8-sig")
    # sqlcmd prints FOR JSON's ~2 KB rows as lines: the document is their concatenation
    # (FOR JSON writes no line breaks of its own).
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise LayoutError(f"{path}: no JSON object in it (the output of the layout query)")
    try:
        return layout_from_json("".join(text[start:end + 1].splitlines()), source=str(path))
    except json.JSONDecodeError as exc:
        raise LayoutError(f"{path}: not JSON ({exc})") from exc


def soft_numa_layout(layout: Layout, cpus_per_node: int) -> Layout:
    """Manual soft-NUMA: each hardware node (memory node) cut into nodes of `cpus_per_node`
    CPUs, numbered in order; none spans hardware nodes or processor groups."""
    hardware: dict[int, list[Node]] = {}
    for n in layout.nodes:
        hardware.setdefault(n.memory_node_id, []).append(n)
    out: list[Node] = []
    for memory_node, parts in sorted(hardware.items()):
        groups = {p.group for p in parts}
        if len(groups) != 1:
            raise LayoutError(f"memory node {memory_node} spans processor groups {sorted(groups)}")
        cpus = sorted(c for p in parts for c in p.cpus)
        if cpus_per_node < 1 or len(cpus) % cpus_per_node:
            raise LayoutError(f"--soft-numa {cpus_per_node}: memory node {memory_node} has {len(cpus)} CPUs; "
                              f"use a node size that divides every hardware node's CPU count")
        group = parts[0].group
        for i in range(0, len(cpus), cpus_per_node):
            out.append(Node(node_id=len(out), memory_node_id=memory_node, group=group,
                            cpus=tuple(cpus[i:i + cpus_per_node]), schedulers=cpus_per_node))
    if len(out) > MAX_NODES:
        raise LayoutError(f"--soft-numa {cpus_per_node}: {len(out)} nodes; a port's node mask addresses at most "
                          f"{MAX_NODES} (use a larger node size)")
    return Layout(nodes=tuple(out), source=f"soft-NUMA nodes of {cpus_per_node} CPU(s) cut from {layout.source}",
                  softnuma="MANUAL")


def with_affinity(layout: Layout, cpu_ids: Iterable[int]) -> Layout:
    """The layout once PROCESS AFFINITY CPU = `cpu_ids` is in force: nodes keep the CPUs named."""
    keep = set(cpu_ids)
    unknown = keep - set(layout.cpu_ids)
    if unknown:
        raise LayoutError(f"--affinity names CPU ids the layout does not have: {ranges(unknown)} (the layout's: "
                          f"{ranges(layout.cpu_ids)}; with several processor groups, group g's CPUs are 64g + n)")
    nodes = []
    for n in layout.nodes:
        cpus = tuple(c for c in n.cpus if n.group * GROUP_SIZE + c in keep)
        if cpus:
            nodes.append(Node(n.node_id, n.memory_node_id, n.group, cpus, len(cpus)))
    return Layout(nodes=tuple(nodes), source=layout.source, softnuma=layout.softnuma, assumed=layout.assumed)


# Automatic soft-NUMA splits a hardware node of more than 8 physical cores; NODESxCPUS gives
# logical CPUs, so a node of more than 8 of them may be split (all of them are past 16).
AUTO_SOFT_NUMA_CORES = 8


def parse_cpu_list(value: str) -> list[int]:
    """`0-47,64-111` or `0 TO 47, 64 TO 111` into CPU ids."""
    out = []
    for part in re.split(r"\s*,\s*", value.strip()):
        m = re.fullmatch(r"(\d+)(?:\s*(?:-|TO|to)\s*(\d+))?", part)
        if not m:
            raise LayoutError(f"--affinity {value!r}: CPU ids like 0-47,64-111")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise LayoutError(f"--affinity: {part!r} is reversed")
        out.extend(range(lo, hi + 1))
    return out


@dataclass(frozen=True)
class PortPlan:
    """Which port serves which node, and which port each stream dials."""
    layout: Layout
    base_port: int
    port_nodes: tuple[int, ...]      # port base_port + i serves node port_nodes[i]
    stream_ports: tuple[int, ...]    # the port of stream k is stream_ports[k - 1]

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(self.base_port + i for i in range(len(self.port_nodes)))

    def node_of_port(self, port: int) -> Node:
        return self.layout.node(self.port_nodes[port - self.base_port])

    def streams_by_node(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {n: [] for n in self.port_nodes}
        for k, port in enumerate(self.stream_ports, start=1):
            out[self.port_nodes[port - self.base_port]].append(k)
        return out

    def shared(self) -> list[tuple[Node, int]]:
        """Nodes that get more streams than they have schedulers, with their stream counts."""
        return [(self.layout.node(n), len(ks)) for n, ks in self.streams_by_node().items()
                if len(ks) > self.layout.node(n).schedulers]

    @property
    def round_robin(self) -> bool:
        """Stream k dials base + (k - 1) mod ports: the connection needs only base_port, port_count."""
        p = len(self.port_nodes)
        return all(port == self.base_port + (k - 1) % p for k, port in enumerate(self.stream_ports, start=1))

    def connection_extras(self) -> dict[str, Any]:
        if self.round_robin:
            return {"base_port": self.base_port, "port_count": len(self.port_nodes)}
        return {"ports": ",".join(str(p) for p in self.stream_ports)}

    def tcp_port_value(self) -> str:
        """The Configuration Manager TCP Port value: port base + i listens for its node."""
        return ",".join(f"{self.base_port + i}[{node_mask(n)}]" for i, n in enumerate(self.port_nodes))


def _interleaved(layout: Layout) -> list[Node]:
    """Nodes ordered so that consecutive ones sit on different hardware nodes: the first node
    of each memory node, then the second of each, ..."""
    by_memory: dict[int, list[Node]] = {}
    for n in layout.nodes:
        by_memory.setdefault(n.memory_node_id, []).append(n)
    columns = [sorted(v, key=lambda n: n.node_id) for _, v in sorted(by_memory.items())]
    out = []
    for i in range(max(len(c) for c in columns)):
        out.extend(c[i] for c in columns if i < len(c))
    return out


def plan_ports(layout: Layout, streams: int, base_port: int = 2000) -> PortPlan:
    """One port per node of the layout, in interleaved order; streams given to the node with
    the most free schedulers (ties: the interleaved order), so streams spread over hardware
    nodes and no node takes more streams than it has schedulers while another has room."""
    if streams < 1:
        raise LayoutError("streams must be at least 1")
    order = [n for n in _interleaved(layout) if n.schedulers > 0]
    if not order:
        raise LayoutError("the layout has no node with an online scheduler")
    if len(order) > MAX_NODES:
        raise LayoutError(f"{len(order)} nodes: a port's node mask addresses at most {MAX_NODES}")
    for n in order:
        node_mask(n.node_id)
    if not (0 < base_port and base_port + len(order) - 1 < 65536):
        raise LayoutError("ports must lie in 1..65535")
    load = [0] * len(order)
    stream_ports = []
    for _ in range(streams):
        i = min(range(len(order)), key=lambda i: (load[i] - order[i].schedulers, load[i], i))
        load[i] += 1
        stream_ports.append(base_port + i)
    return PortPlan(layout=layout, base_port=base_port, port_nodes=tuple(n.node_id for n in order),
                    stream_ports=tuple(stream_ports))


def server_config(layout: Layout, streams: int, base_port: int = 2000, soft_numa: int | None = None,
                  affinity: Iterable[int] | None = None) -> str:
    """Everything a DBA sets for pinned load ports on `layout`, as one reviewable text."""
    hardware = layout
    if soft_numa is not None:
        layout = soft_numa_layout(layout, soft_numa)
    affinity = sorted(set(affinity)) if affinity is not None else None
    if affinity is not None:
        layout = with_affinity(layout, affinity)
    plan = plan_ports(layout, streams, base_port)
    total_cpus = len(hardware.cpu_ids)
    # NODESxCPUS with nodes that automatic soft-NUMA may split: the port map below names
    # hardware nodes, which holds only with automatic soft-NUMA off; the config says so and
    # turns it off (or the DBA plans from the real layout instead).
    auto_off = (hardware.assumed and soft_numa is None
                and max(len(n.cpus) for n in hardware.nodes) > AUTO_SOFT_NUMA_CORES)
    lines = [f"-- Switchyard: server configuration for {streams} load stream(s) on pinned ports",
             f"-- Layout from {hardware.source}:"]
    lines += [f"--   {x}" for x in hardware.describe()]
    if hardware.assumed:
        lines += ["--",
                  "-- Assumed, not read: node ids 0..N-1 are the hardware NUMA nodes as the server numbers them.",
                  "-- SQL Server 2016+ turns on automatic soft-NUMA for hardware nodes of more than 8 physical",
                  "-- cores and then numbers soft nodes instead, which the port map would name wrongly. To check,",
                  "-- run the layout query on the server (each node's memory_node_id is its hardware node):",
                  "--   SELECT node_id, memory_node_id, processor_group, online_scheduler_count FROM sys.dm_os_nodes",
                  "--   WHERE node_state_desc NOT LIKE N'%DAC%';  -- and: SELECT softnuma_configuration_desc FROM",
                  "--   sys.dm_os_sys_info;",
                  "-- and plan from its output (--layout <file>: `plan --emit server-config` without --layout prints",
                  "-- the whole query), which maps the ports to the nodes the server really has."]
        if auto_off:
            lines += [f"-- These nodes have more than {AUTO_SOFT_NUMA_CORES} CPUs: this config turns automatic "
                      "soft-NUMA off (step 2),",
                      "-- so that the node ids are the hardware nodes the port map names."]
    lines += ["--",
              "-- Port-to-node mapping is a Windows setting of the instance, not T-SQL, and SQL Server on",
              "-- Linux has none (it listens on one port): there, map several client ports to that one",
              "-- (the docker-compose stack does) and rely on the scheduler guard alone."]
    if affinity is None:
        lines.append(f"-- Nothing here changes the instance's CPU affinity: it keeps all {total_cpus} CPUs.")
    lines += ["--",
              "-- 1. Ports: SQL Server Configuration Manager, SQL Server Network Configuration, Protocols for",
              "--    <instance>, TCP/IP, IP Addresses, IPAll: TCP Port =",
              f"--    {plan.tcp_port_value()}",
              "--    and TCP Dynamic Ports = blank (delete any value, 0 included: with a dynamic port the",
              "--    instance may listen elsewhere after a restart). Then restart the instance.",
              "--    Each port names one node; streams are spread so that no node has more than it has",
              "--    schedulers while another has room:"]
    for i, node_id in enumerate(plan.port_nodes):
        node = layout.node(node_id)
        ks = plan.streams_by_node()[node_id]
        shown = ", ".join(map(str, ks[:12])) + (f", ... ({len(ks)} streams)" if len(ks) > 12 else "")
        lines.append(f"--      port {plan.base_port + i} -> node {node_id} (memory node {node.memory_node_id}, group "
                     f"{node.group}, {node.schedulers} scheduler(s)): streams {shown or 'none'}")
    lines.append(f"--    Switchyard's connection extras: {json.dumps(plan.connection_extras())}")
    shared = plan.shared()
    if shared:
        for node, count in shared:
            lines.append(f"--    Node {node.node_id} gets {count} streams for {node.schedulers} scheduler(s): the "
                         f"scheduler guard lets the extra loads share, and they run slower.")
    else:
        lines.append("--    No node gets more streams than it has schedulers: with the scheduler guard each load")
        lines.append("--    runs on a scheduler of its own.")
    step = 2
    if auto_off:
        lines += ["--",
                  f"-- {step}. Automatic soft-NUMA off, so that the server's node ids are the hardware nodes the port",
                  "--    map above names. It takes effect at the restart of step 1: run it before that restart,",
                  "--    with SQL Server Agent stopped (stopping the Agent after it and before the restart reverts",
                  "--    it). After the restart each node's memory_node_id equals its node_id. Planning from the real layout",
                  "--    instead keeps automatic soft-NUMA and maps the ports to its soft nodes.",
                  "ALTER SERVER CONFIGURATION SET SOFTNUMA OFF;",
                  "GO"]
        step += 1
    elif not hardware.assumed and soft_numa is None:
        lines += ["--",
                  "--    The node ids above are the server's as it reports them now"
                  + (f" (soft-NUMA {hardware.softnuma})" if hardware.softnuma else "") + "; a change of",
                  "--    its soft-NUMA configuration or CPU count renumbers them: read the layout again after one."]
    if soft_numa is not None:
        lines += ["--",
                  f"-- {step}. Soft-NUMA nodes of {soft_numa} CPU(s), one per port (machine-wide registry keys of the",
                  "--    Windows server; <nnn> is the version: 130 for 2016, 140, 150, 160 for 2022). CPUMask is",
                  "--    relative to the node's processor Group, both from the layout above; use QWORD values past",
                  "--    the 32nd CPU of a group. Restart after the registry change."]
        for node in layout.nodes:
            lines.append(f"--    HKLM\\SOFTWARE\\Microsoft\\Microsoft SQL Server\\<nnn>\\NodeConfiguration\\Node"
                         f"{node.node_id}: CPUMask = {cpu_mask(node.cpus)}, Group = {node.group}")
        lines += ["--    Manual soft-NUMA needs automatic soft-NUMA off (takes effect at the restart). Stop SQL",
                  "--    Server Agent first: stopping it before the restart reverts this setting.",
                  "ALTER SERVER CONFIGURATION SET SOFTNUMA OFF;",
                  "GO"]
        step += 1
    if affinity is not None:
        kept = len(layout.cpu_ids)
        lines += ["--",
                  f"-- {step}. CPU affinity, as asked for: the instance then runs on {kept} of its {total_cpus} CPUs.",
                  "--    ALTER SERVER CONFIGURATION SET PROCESS AFFINITY takes effect at once, online, for every",
                  "--    workload of the instance. CPU ids are SQL Server's (group g's CPUs are 64g + n).",
                  "--    To undo: ALTER SERVER CONFIGURATION SET PROCESS AFFINITY CPU = AUTO;",
                  f"ALTER SERVER CONFIGURATION SET PROCESS AFFINITY CPU = {ranges(affinity)};",
                  "GO"]
        step += 1
    lines += ["--",
              f"-- {step}. After the restart, check: the nodes and their schedulers, the port each session came in",
              "--    on, and instant file initialization (data files grow and are created without zeroing).",
              "SELECT node_id, memory_node_id, processor_group, online_scheduler_count FROM sys.dm_os_nodes "
              "WHERE node_state_desc NOT LIKE N'%DAC%';",
              "GO",
              "SELECT softnuma_configuration_desc FROM sys.dm_os_sys_info;",
              "GO",
              "SELECT session_id, local_tcp_port FROM sys.dm_exec_connections;",
              "GO",
              "SELECT servicename, instant_file_initialization_enabled FROM sys.dm_server_services;",
              "GO"]
    return "\n".join(lines) + "\n"


def mssql_plan_ports(args: Any) -> tuple[str, list[int]]:
    """`plan --target mssql --layout ... [--emit server-config]`: the server config's text and
    the port of each stream (the SQL script dials the same ports). Exits with the layout
    query when no layout is given: node masks and processor groups are never guessed."""
    import sys
    if not args.layout:
        sys.exit("plan --emit server-config needs --layout: the server's CPU layout, as this query prints it on "
                 "the server (save its output to a file and pass the file), or NODESxCPUS such as 2x48 to plan "
                 f"ahead. With sqlcmd:\n  {LAYOUT_COMMAND}\n\nSET NOCOUNT ON;\n{LAYOUT_SQL};\n")
    try:
        layout = read_layout(args.layout)
        affinity = parse_cpu_list(args.affinity) if args.affinity else None
        text = server_config(layout, args.streams, base_port=args.base_port, soft_numa=args.soft_numa,
                             affinity=affinity)
        effective = soft_numa_layout(layout, args.soft_numa) if args.soft_numa is not None else layout
        if affinity is not None:
            effective = with_affinity(effective, affinity)
        plan = plan_ports(effective, args.streams, args.base_port)
        # The port map as the connection takes it: the ports in order when streams go round-robin.
        ports = list(plan.ports if plan.round_robin else plan.stream_ports)
    except LayoutError as exc:
        sys.exit(f"plan --target mssql: {exc}")
    return text, ports

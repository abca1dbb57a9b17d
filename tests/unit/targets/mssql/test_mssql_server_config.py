"""The SQL Server instance settings for pinned loads, from the server's real CPU layout.

No SQL Server runs here. Layouts come in the two ways a user gives them: the JSON that the
layout query (LAYOUT_SQL, run on the server) prints, and the NODESxCPUS shorthand. The JSON
documents below are SCRIPTED DMV ANSWERS: written by hand in the shape sys.dm_os_nodes and
sys.dm_os_schedulers return (FOR JSON PATH), for machines this project has no access to.
"""
from __future__ import annotations

import json
import re

import pytest

from switchyard.targets.mssql.server_config import (LAYOUT_SQL, LayoutError, assumed_layout, cpu_mask,
                                                    layout_from_json, node_mask, parse_cpu_list, plan_ports,
                                                    ranges, read_layout, server_config, soft_numa_layout)


def scripted_layout(nodes: list[tuple[int, int, int, list[int]]]) -> dict:
    """SCRIPTED DMV ANSWER: LAYOUT_SQL's document for nodes given as
    (node_id, memory_node_id, processor_group, CPU numbers within the group)."""
    doc = {"nodes": [], "schedulers": []}
    scheduler = 0
    for node_id, memory, group, cpus in nodes:
        mask = sum(1 << c for c in cpus)
        doc["nodes"].append({"node_id": node_id, "memory_node_id": memory, "processor_group": group,
                             "cpu_affinity_mask": mask - (1 << 64) if mask >= 1 << 63 else mask,
                             "online_scheduler_count": len(cpus)})
        for c in cpus:
            doc["schedulers"].append({"parent_node_id": node_id, "scheduler_id": scheduler, "cpu_id": group * 64 + c})
            scheduler += 1
    return doc


# SCRIPTED DMV ANSWER: 96 logical CPUs in two NUMA nodes, which Windows puts in two processor
# groups of 48 (not 64 + 32); SQL Server numbers the second group's CPUs 64..111.
TWO_BY_48 = scripted_layout([(0, 0, 0, list(range(48))), (1, 1, 1, list(range(48)))])
# SCRIPTED DMV ANSWER: four NUMA nodes of 8 CPUs in one group.
FOUR_NODES = scripted_layout([(n, n, 0, list(range(8 * n, 8 * n + 8))) for n in range(4)])


def statements(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith("--") and ln != "GO"]


# --- the must-show layouts ----------------------------------------------------------------------
def test_96_streams_on_a_2x48_layout_given_as_input():
    layout = layout_from_json(json.dumps(TWO_BY_48))
    assert layout.groups == {0: 48, 1: 48}
    assert [n.cpu_ids[-1] for n in layout.nodes] == [47, 111]
    text = server_config(layout, 96)
    # Never an instance-wide affinity unless asked for; no soft-NUMA change either.
    assert "PROCESS AFFINITY" not in "\n".join(statements(text))
    assert "SOFTNUMA" not in "\n".join(statements(text))
    assert "it keeps all 96 CPUs" in text
    # One port per node, the node masks from the layout's node ids.
    assert "--    2000[0x1],2001[0x2]\n" in text
    plan = plan_ports(layout, 96)
    assert {n: len(ks) for n, ks in plan.streams_by_node().items()} == {0: 48, 1: 48}
    assert plan.shared() == []  # every stream has a scheduler of its own in its node
    assert plan.stream_ports[:4] == (2000, 2001, 2000, 2001)
    assert '{"base_port": 2000, "port_count": 2}' in text
    assert "group 1, CPUs 0-47 of the group (cpu_id 64-111)" in text


def test_96_streams_on_2x48_with_soft_numa_nodes_of_2_cpus():
    layout = layout_from_json(TWO_BY_48)
    text = server_config(layout, 96, soft_numa=2)
    keys = re.findall(r"NodeConfiguration\\Node(\d+): CPUMask = (0x[0-9A-F]+), Group = (\d+)", text)
    assert len(keys) == 48
    # Node masks relative to the node's real group: group 1's nodes start again at CPU 0.
    assert keys[0] == ("0", "0x3", "0") and keys[23] == ("23", "0xC00000000000", "0")
    assert keys[24] == ("24", "0x3", "1") and keys[47] == ("47", "0xC00000000000", "1")
    assert "ALTER SERVER CONFIGURATION SET SOFTNUMA OFF;" in statements(text)
    assert "PROCESS AFFINITY" not in "\n".join(statements(text))
    plan = plan_ports(soft_numa_layout(layout, 2), 96)
    assert len(plan.ports) == 48 and plan.shared() == []
    assert all(len(ks) == 2 for ks in plan.streams_by_node().values())
    # Consecutive streams land on different hardware nodes.
    nodes = [plan.node_of_port(p).memory_node_id for p in plan.stream_ports[:4]]
    assert nodes == [0, 1, 0, 1]


def test_soft_numa_never_exceeds_what_a_port_mask_addresses():
    with pytest.raises(LayoutError, match="96 nodes; a port's node mask addresses at most 64"):
        server_config(layout_from_json(TWO_BY_48), 96, soft_numa=1)
    with pytest.raises(LayoutError, match="divides every hardware node's CPU count"):
        server_config(layout_from_json(TWO_BY_48), 96, soft_numa=5)


def test_8_streams_on_a_4_node_layout():
    for layout in (layout_from_json(FOUR_NODES), read_layout("4x8")):
        text = server_config(layout, 8)
        assert "--    2000[0x1],2001[0x2],2002[0x4],2003[0x8]\n" in text
        plan = plan_ports(layout, 8)
        assert plan.streams_by_node() == {0: [1, 5], 1: [2, 6], 2: [3, 7], 3: [4, 8]}
        assert plan.shared() == [] and plan.round_robin
        assert statements(text)[:1] == ["SELECT node_id, memory_node_id, processor_group, online_scheduler_count "
                                        "FROM sys.dm_os_nodes WHERE node_state_desc NOT LIKE N'%DAC%';"]
        assert "PROCESS AFFINITY" not in "\n".join(statements(text))


def test_automatic_soft_numa_nodes_are_used_as_the_server_has_them():
    """SCRIPTED DMV ANSWER: two sockets of 24 logical CPUs that SQL Server 2016+ split itself
    into three nodes each (automatic soft-NUMA): six node ids over two memory nodes."""
    doc = scripted_layout([(0, 0, 0, list(range(0, 8))), (1, 0, 0, list(range(8, 16))),
                           (2, 0, 0, list(range(16, 24))), (3, 1, 0, list(range(24, 32))),
                           (4, 1, 0, list(range(32, 40))), (5, 1, 0, list(range(40, 48)))])
    plan = plan_ports(layout_from_json(doc), 12)
    # Ports interleave the memory nodes: consecutive streams on different sockets.
    assert plan.port_nodes == (0, 3, 1, 4, 2, 5)
    assert plan.tcp_port_value() == "2000[0x1],2001[0x8],2002[0x2],2003[0x10],2004[0x4],2005[0x20]"
    # The layout query's answer says automatic soft-NUMA is on: the config says the node ids are
    # the soft nodes, and keeps them (no SOFTNUMA change).
    text = server_config(layout_from_json({**doc, "softnuma": "ON"}), 12)
    assert "soft-NUMA ON (automatic: the nodes are the soft nodes the server formed" in text
    assert "SOFTNUMA" not in text and "2000[0x1],2001[0x8]" in text
    assert "The node ids above are the server's as it reports them now (soft-NUMA ON)" in text


def test_nodes_x_cpus_says_its_assumption_and_never_leaves_automatic_soft_numa_to_chance():
    """2x48 without --soft-numa: automatic soft-NUMA (2016+, nodes of more than 8 physical
    cores) would renumber the nodes the port map names; the config says what it assumed, how to
    check it, and turns automatic soft-NUMA off so that the map holds."""
    text = server_config(assumed_layout(2, 48), 96)
    assert "Assumed, not read: node ids 0..N-1 are the hardware NUMA nodes" in text
    assert "SELECT node_id, memory_node_id, processor_group, online_scheduler_count FROM sys.dm_os_nodes" in text
    assert "2000[0x1],2001[0x2]" in text
    statements_run = statements(text)
    assert "ALTER SERVER CONFIGURATION SET SOFTNUMA OFF;" in statements_run
    assert text.index("SET SOFTNUMA OFF") > text.index("2000[0x1],2001[0x2]")
    # Nodes of 8 CPUs or fewer are never split automatically: the assumption is said, nothing turned off.
    small = server_config(assumed_layout(4, 8), 8)
    assert "Assumed, not read" in small and "SOFTNUMA" not in small
    # With --soft-numa the nodes are set by hand (manual soft-NUMA turns automatic off already).
    manual = server_config(assumed_layout(2, 48), 96, soft_numa=2)
    assert manual.count("SET SOFTNUMA OFF") == 1
    with pytest.raises(LayoutError, match="softnuma is OFF, ON or MANUAL"):
        layout_from_json({**scripted_layout([(0, 0, 0, [0, 1])]), "softnuma": "AUTO"})


def test_uneven_nodes_get_streams_by_their_schedulers():
    """SCRIPTED DMV ANSWER: an affinity already in force left node 1 with 2 online schedulers."""
    doc = scripted_layout([(0, 0, 0, list(range(6))), (1, 1, 0, [6, 7])])
    plan = plan_ports(layout_from_json(doc), 8)
    assert {n: len(ks) for n, ks in plan.streams_by_node().items()} == {0: 6, 1: 2}
    assert not plan.round_robin
    assert plan.connection_extras() == {"ports": ",".join(str(p) for p in plan.stream_ports)}
    more = plan_ports(layout_from_json(doc), 10)
    assert [(n.node_id, count) for n, count in more.shared()] == [(0, 7), (1, 3)]
    assert "gets 7 streams for 6 scheduler(s)" in server_config(layout_from_json(doc), 10)


def test_affinity_only_when_asked_and_only_cpus_the_layout_has():
    layout = layout_from_json(TWO_BY_48)
    text = server_config(layout, 48, affinity=parse_cpu_list("0-23,64-87"))
    assert "ALTER SERVER CONFIGURATION SET PROCESS AFFINITY CPU = 0 TO 23, 64 TO 87;" in statements(text)
    assert "runs on 48 of its 96 CPUs" in text and "PROCESS AFFINITY CPU = AUTO" in text
    assert plan_ports(layout, 48).shared() == []
    with pytest.raises(LayoutError, match="CPU ids the layout does not have: 48 TO 63"):
        server_config(layout, 8, affinity=parse_cpu_list("0-63"))


def test_layout_json_is_checked():
    for bad, message in [({"nodes": []}, "non-empty list"),
                         ({"nodes": [{"node_id": 64, "cpu_affinity_mask": 1}]}, "node_id must be"),
                         ({"nodes": [{"node_id": 0}]}, "needs cpu_affinity_mask or cpus"),
                         ({"nodes": [{"node_id": 0, "cpus": [0]}, {"node_id": 1, "cpus": [0]}]}, "shares CPUs"),
                         ({"nodes": [{"node_id": 0, "cpus": [0]}, {"node_id": 0, "cpus": [1]}]}, "appears twice")]:
        with pytest.raises(LayoutError, match=message):
            layout_from_json(bad)
    # A mask with bit 63 set comes back from a bigint as a negative number.
    (node,) = layout_from_json({"nodes": [{"node_id": 0, "cpu_affinity_mask": -(1 << 63)}]}).nodes
    assert node.cpus == (63,)


def test_a_layout_file_as_sqlcmd_writes_it(tmp_path):
    """sqlcmd prints FOR JSON's ~2 KB rows as separate lines, cut anywhere."""
    text = json.dumps(TWO_BY_48, separators=(",", ":"))
    cut = "\n".join(text[i:i + 2033] for i in range(0, len(text), 2033))
    path = tmp_path / "layout.json"
    path.write_text(cut + "\n")
    assert len(cut.splitlines()) > 1
    assert read_layout(str(path)).groups == {0: 48, 1: 48}
    with pytest.raises(LayoutError, match="neither a layout file"):
        read_layout(str(tmp_path / "missing.json"))


def test_assumed_layouts_form_groups_from_whole_nodes():
    assert assumed_layout(2, 48).groups == {0: 48, 1: 48}
    assert assumed_layout(4, 24).groups == {0: 48, 1: 48}
    assert assumed_layout(8, 8).groups == {0: 64}
    assert "assumed" in assumed_layout(2, 48).source
    with pytest.raises(LayoutError):
        assumed_layout(1, 96)


def test_masks_and_ranges():
    assert node_mask(0) == "0x1" and node_mask(63) == "0x8000000000000000"
    with pytest.raises(LayoutError):
        node_mask(64)
    assert cpu_mask([2, 3]) == "0xC"
    assert ranges([0, 1, 2, 5, 64, 65]) == "0 TO 2, 5, 64 TO 65"
    assert parse_cpu_list("0-2, 5,64 TO 65") == [0, 1, 2, 5, 64, 65]


def test_the_layout_query_and_the_config_statements_parse_as_tsql():
    from test_mssql_tsql import sqlfluff_parses
    assert sqlfluff_parses(LAYOUT_SQL)
    text = server_config(layout_from_json(TWO_BY_48), 96, soft_numa=2, affinity=range(0, 48))
    # sqlfluff's T-SQL grammar has no ALTER SERVER CONFIGURATION: those two are checked
    # against the statement's documented syntax (<process_affinity>, <soft_numa>) instead.
    documented = re.compile(r"ALTER SERVER CONFIGURATION SET (SOFTNUMA (ON|OFF)|PROCESS AFFINITY "
                            r"(CPU = (AUTO|\d+( TO \d+)?(, \d+( TO \d+)?)*)|NUMANODE = \d+( TO \d+)?(, \d+( TO \d+)?)*));")
    checked = 0
    for stmt in statements(text):
        if stmt.startswith("ALTER SERVER CONFIGURATION"):
            assert documented.fullmatch(stmt), stmt
            checked += 1
        else:
            assert sqlfluff_parses(stmt.rstrip(";")), stmt
    assert checked == 2
    assert not documented.fullmatch("ALTER SERVER CONFIGURATION SET PROCESS AFFINITY CPU = 0 TO;")


def test_server_config_matches_golden():
    from test_mssql_tsql import check_golden
    check_golden("server_config_4_nodes.sql", server_config(layout_from_json(FOUR_NODES), 8))
    check_golden("server_config_2x48_soft_numa.sql", server_config(layout_from_json(TWO_BY_48), 96, soft_numa=2))

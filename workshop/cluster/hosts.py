"""What ``workshop run`` needs to launch across the nodes of an emulated cluster, and to say
which host a failed rank was on.

``workshop cluster run -- workshop run ...`` starts ``workshop run`` on the first node with
``WORKSHOP_CLUSTER`` naming the cluster's state file (and ``WORKSHOP_RANKS_PER_NODE`` when
given). :func:`cluster_launch` turns that into horovodrun's host list and network interface;
both Gloo and Open MPI place ranks in host-list order (rank 0, 1, ... fill the first host's
slots, then the next host's), so the rank -> host map is known before the run starts.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ENV_STATE = "WORKSHOP_CLUSTER"
ENV_RANKS_PER_NODE = "WORKSHOP_RANKS_PER_NODE"


@dataclass(frozen=True)
class ClusterLaunch:
    """horovodrun's ``-H`` and ``--network-interface`` for one run, and what run.json records
    about the cluster (``record``)."""

    hosts: str
    interface: str
    record: dict


def placement(np: int, nodes: list[str], ranks_per_node: int | None = None) -> dict[str, int]:
    """Ranks per node, in node order: ``ranks_per_node`` each until ``np`` are placed, or
    (default) ``np`` spread as evenly as possible, earlier nodes taking the remainder.

    >>> placement(4, ["nodea", "nodeb"])
    {'nodea': 2, 'nodeb': 2}
    >>> placement(2, ["nodea", "nodeb"], ranks_per_node=2)
    {'nodea': 2}
    >>> placement(3, ["nodea", "nodeb"])
    {'nodea': 2, 'nodeb': 1}

    Raises:
        ValueError: the nodes cannot hold ``np`` ranks at ``ranks_per_node`` each.
    """
    if np < 1 or not nodes:
        raise ValueError(f"np={np} on nodes {nodes}: need np >= 1 and at least one node")
    if ranks_per_node is not None:
        if ranks_per_node < 1 or ranks_per_node * len(nodes) < np:
            raise ValueError(
                f"np={np} does not fit {len(nodes)} node(s) x --ranks-per-node {ranks_per_node}"
            )
        counts = [min(ranks_per_node, np - i * ranks_per_node) for i in range(len(nodes))]
    else:
        base, extra = divmod(np, len(nodes))
        counts = [base + (1 if i < extra else 0) for i in range(len(nodes))]
    return {node: count for node, count in zip(nodes, counts, strict=True) if count > 0}


def rank_hosts(per_node: Mapping[str, int]) -> dict[int, str]:
    """Rank -> host for horovodrun's host-list order. ``{"nodea": 2, "nodeb": 1}`` gives
    ``{0: "nodea", 1: "nodea", 2: "nodeb"}``."""
    ranks = [host for host, count in per_node.items() for _ in range(count)]
    return dict(enumerate(ranks))


def cluster_launch(np: int, env: Mapping[str, str] | None = None) -> ClusterLaunch | None:
    """The host list for ``np`` ranks when this process runs inside an emulated cluster
    (``WORKSHOP_CLUSTER`` set), else None.

    Raises:
        ValueError: the state file is missing or unreadable, or the ranks do not fit.
    """
    env = os.environ if env is None else env
    path = env.get(ENV_STATE)
    if not path:
        return None
    try:
        state = json.loads(Path(path).read_text())
        nodes = [node["name"] for node in state["nodes"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{ENV_STATE}={path}: no readable cluster state file ({exc}); is the cluster up? "
            "(`workshop cluster status`)"
        ) from exc
    per_node_text = env.get(ENV_RANKS_PER_NODE)
    per_node = placement(np, nodes, int(per_node_text) if per_node_text else None)
    hosts = ",".join(f"{host}:{count}" for host, count in per_node.items())
    record = {
        "emulated": True,
        "nodes": nodes,
        "ranks_per_node": per_node,
        "rank_hosts": {str(rank): host for rank, host in rank_hosts(per_node).items()},
        "interface": state["interface"],
        "link": state["spec"]["link"],
        "link_bits_per_s": state["link_bits_per_s"],
        "hosts": hosts,
    }
    return ClusterLaunch(hosts, state["interface"], record)


# What horovodrun (Gloo) and mpirun print when a rank or a node is lost. Each pattern gives the
# rank or the host (or both); the rest comes from the rank -> host map.
_FAILURE_PATTERNS = (
    # Open MPI: a rank died ("mpirun noticed that process rank 1 with PID 0 on node nodeb
    # exited on signal 9 (Killed).")
    re.compile(
        r"process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+?) "
        r"(?P<reason>exited .*?)\.?$",
        re.MULTILINE,
    ),
    # Open MPI: the ssh to a node's orted ended ("Remote daemon: [[...],1] on node nodeb")
    re.compile(r"Remote daemon: \[\[[^\]]*\],\d+\] on node (?P<host>\S+)"),
    # ssh gave up on a node: Gloo's ranks run under ssh ("[1]<stderr>:Timeout, server nodeb not
    # responding."), Open MPI's daemons too (the same line, no rank: every rank of that host)
    re.compile(
        r"^(?:\[(?P<rank>\d+)\]<stderr>:)?"
        r"(?P<reason>Timeout, server (?P<host>\S+) not responding)",
        re.MULTILINE,
    ),
    # horovodrun (Gloo): "Process 1 exit with status code 137."
    re.compile(r"^Process (?P<rank>\d+) exit with status code (?P<reason>-?\d+)\.", re.MULTILINE),
)
_REASONS = {
    1: "lost contact with the node's Open MPI daemon (its ssh ended: node or link down)",
}


def first_failure(launcher_log: str, hosts_of_ranks: Mapping[int, str]) -> dict | None:
    """The first rank (and its host) that the launcher reported lost, from ``logs/launcher.log``.

    Returns:
        ``{"host", "ranks", "reason", "line"}`` (``ranks``: the failed rank, or every rank on
        the host when only the host is named), or None when the log names none.
    """
    found = []
    for index, pattern in enumerate(_FAILURE_PATTERNS):
        for match in pattern.finditer(launcher_log):
            found.append((match.start(), index, match))
    if not found:
        return None
    _, index, match = min(found, key=lambda item: (item[1] != 2, item[0]))
    groups = match.groupdict()
    rank = int(groups["rank"]) if groups.get("rank") else None
    host = groups.get("host") or (hosts_of_ranks.get(rank) if rank is not None else None)
    if rank is not None:
        ranks = [rank]
    else:
        ranks = [r for r, h in sorted(hosts_of_ranks.items()) if h == host]
    reason = groups.get("reason") or _REASONS.get(index, "")
    if index == 3:
        reason = (
            f"its process ended with exit status {reason} (255: its ssh session ended: the "
            "process was killed, or the node or its link went down)"
            if reason == "255"
            else f"its process ended with exit status {reason}"
        )
    return {"host": host, "ranks": ranks, "reason": reason, "line": match.group(0).strip()}

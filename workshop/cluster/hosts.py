"""What ``workshop run`` needs to launch across the nodes of an emulated cluster, and the
evidence of where each rank ran.

``workshop cluster run -- workshop run ...`` starts ``workshop run`` on the first node with
``WORKSHOP_CLUSTER`` naming the cluster's state file (and ``WORKSHOP_RANKS_PER_NODE`` when
given). :func:`cluster_launch` turns that into horovodrun's host list and network interface;
both Gloo and Open MPI place ranks in host-list order (rank 0, 1, ... fill the first host's
slots, then the next host's), so the rank -> host map is known before the run starts.

That map is the cluster's evidence for a failure: run.json records it (``cluster.rank_hosts``),
:func:`workshop.readers.exits.rank_ends_in` joins it to the launcher's reports (which rank or
which node the launcher lost, and when: :data:`workshop.readers.exits.LAUNCHER_PATTERNS`), and
:func:`workshop.analysis.failure.attribute` alone decides which rank started the failure.
"""

from __future__ import annotations

import json
import os
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

"""What an emulated cluster is made of: node names, addresses, the interface and the link rate.

Everything here is pure (no root, no processes), so it is tested anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_NODES = 4
NODE_NAMES = ("nodea", "nodeb", "nodec", "noded")
INTERFACE = "hsn0"
SUBNET = "10.77.0"  # private addresses, used only inside the cluster's own namespaces
FIRST_HOST = 11  # nodea is 10.77.0.11, nodeb .12, ...
NAMESPACE_PREFIX = "wsc-"
SWITCH = NAMESPACE_PREFIX + "switch"
BRIDGE = "br0"
RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
# tbf's bucket: large enough for a full burst of TSO segments at the link rate (>= 1 ms of
# traffic), never below the 256 kB the measurements used.
MIN_BURST_BYTES = 256 * 1024
LATENCY = "50ms"
#: Unanswered ssh keep-alives after which a node counts as lost (ServerAliveCountMax).
ALIVE_MISSED = 3


def parse_rate(text: str) -> float:
    """Bits per second of a tc-style rate: ``"1gbit"`` -> 1e9, ``"500mbit"`` -> 5e8.

    Raises:
        ValueError: naming the rate and the accepted forms.
    """
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(kbit|mbit|gbit)", text.strip().lower())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(
            f"--link {text!r}: a rate like 100mbit, 1gbit or 10gbit (a number > 0, then kbit, "
            "mbit or gbit)"
        )
    return float(match.group(1)) * RATE_UNITS[match.group(2)]


@dataclass(frozen=True)
class Node:
    """One emulated node: its hostname (also its name in every node's /etc/hosts), its
    network namespace and its address on the cluster interface."""

    name: str
    namespace: str
    address: str


@dataclass(frozen=True)
class ClusterSpec:
    """``nodes`` nodes, each with one interface ``INTERFACE`` into a switch namespace, every
    link shaped to ``link`` (a tc rate) in both directions. ``alive_s``: seconds between the
    ssh keep-alives horovodrun's and mpirun's ssh sessions send; a node whose link goes down is
    noticed after ``ALIVE_MISSED`` of them go unanswered."""

    nodes: int = 2
    link: str = "1gbit"
    alive_s: int = 5

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise ValueError(f"--nodes {self.nodes}: 1 to {MAX_NODES} nodes")
        parse_rate(self.link)
        if not 1 <= self.alive_s <= 60:
            raise ValueError(f"--alive-s {self.alive_s}: 1 to 60 seconds")

    @property
    def link_bits_per_s(self) -> float:
        return parse_rate(self.link)

    @property
    def burst_bytes(self) -> int:
        return max(MIN_BURST_BYTES, int(self.link_bits_per_s / 8 / 1000))

    def node_list(self) -> list[Node]:
        return [
            Node(name, NAMESPACE_PREFIX + name, f"{SUBNET}.{FIRST_HOST + i}")
            for i, name in enumerate(NODE_NAMES[: self.nodes])
        ]

    def hosts_file(self) -> str:
        """The /etc/hosts every node sees: its own name must not resolve to 127.0.x.x, or
        Horovod and Gloo would hand a loopback address to the other nodes."""
        lines = ["127.0.0.1 localhost"]
        lines += [f"{node.address} {node.name}" for node in self.node_list()]
        return "\n".join(lines) + "\n"

    def tbf_args(self, device: str) -> list[str]:
        """The ``tc`` arguments that cap ``device``'s egress to the link rate."""
        return [
            "qdisc", "add", "dev", device, "root", "tbf", "rate", self.link,
            "burst", str(self.burst_bytes), "latency", LATENCY,
        ]  # fmt: skip

"""A cluster emulated on one machine: nodes in network namespaces joined by rate-limited links.

``spec`` describes a cluster (nodes, addresses, the link rate) and needs nothing special;
``emulate`` makes and removes it (root: ``ip netns``, veth, a bridge, ``tc tbf``, one ``sshd``
per node); ``hosts`` is what ``workshop run`` reads to launch across the nodes and to name the
host of a failed rank. See docs/clusters.md, "A cluster on one machine".
"""

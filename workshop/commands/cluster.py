"""``workshop cluster``: an emulated cluster on this machine (root; see docs/clusters.md).

    workshop cluster up [--nodes 2] [--link 1gbit]
    workshop cluster run [--ranks-per-node K] [--node nodea] -- workshop run -np 4 ...
    workshop cluster status [--json]
    workshop cluster link NODE up|down        (a cable pulled: for fault drills)
    workshop cluster kill NODE                (SIGKILL the training ranks on NODE)
    workshop cluster down

`workshop cluster run` starts the command on a node with WORKSHOP_CLUSTER set, which makes
`workshop run` launch across the nodes (workshop.cluster.hosts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from workshop.cluster.spec import ALIVE_MISSED, MAX_NODES, ClusterSpec


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cluster",
        help="an emulated multi-node cluster on this machine (root)",
        description="Nodes in network namespaces, each with its own hostname, sshd and "
        "interface hsn0, joined through a switch by links capped with tc tbf; "
        "`workshop cluster run -- workshop run ...` runs Horovod across them.",
    )
    sub = parser.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="make the cluster")
    up.add_argument("--nodes", type=int, default=2, help=f"1 to {MAX_NODES} (default 2)")
    up.add_argument("--link", default="1gbit", help="link rate, a tc rate (default 1gbit)")
    up.add_argument(
        "--alive-s",
        type=int,
        default=5,
        help="seconds between ssh keep-alives: a node whose link goes down is noticed after "
        f"{ALIVE_MISSED} go unanswered (default 5)",
    )
    up.add_argument(
        "--slurm",
        action="store_true",
        help="run Slurm on it too: munged, slurmctld on the first node, slurmd on every node, "
        "one partition; `workshop cluster run -- sbatch --wait JOB.sh` submits (Debian: apt-get "
        "install slurmctld slurmd slurm-client munge)",
    )
    up.add_argument(
        "--mpi-default",
        choices=("pmix", "none"),
        default="pmix",
        help="Slurm's MpiDefault with --slurm (none: a site whose srun hands no PMI)",
    )
    up.set_defaults(func=_up)
    run = sub.add_parser("run", help="run a command on the first node (-- COMMAND ...)")
    run.add_argument("--node", default=None, help="node to run on (default: the first)")
    run.add_argument(
        "--ranks-per-node",
        type=int,
        default=None,
        help="fill each node with this many ranks before the next (default: spread evenly)",
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    run.set_defaults(func=_run)
    status = sub.add_parser("status", help="what is up")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_status)
    link = sub.add_parser("link", help="set a node's link up or down")
    link.add_argument("node")
    link.add_argument("state", choices=("up", "down"))
    link.set_defaults(func=_link)
    kill = sub.add_parser("kill", help="SIGKILL the training ranks on a node")
    kill.add_argument("node")
    kill.set_defaults(func=_kill)
    down = sub.add_parser("down", help="remove everything up made")
    down.set_defaults(func=_down)


def _fail(exc: Exception) -> int:
    print(f"workshop cluster: {exc}", file=sys.stderr)
    return 1


def _up(args: argparse.Namespace) -> int:
    from workshop.cluster import emulate, slurm

    spec = ClusterSpec(nodes=args.nodes, link=args.link, alive_s=args.alive_s)
    try:
        state = emulate.up(spec, slurm=args.slurm, mpi_default=args.mpi_default)
    except (ValueError, emulate.ClusterError, slurm.SlurmError) as exc:
        return _fail(exc)
    for node in state["nodes"]:
        print(f"{node['name']}: {node['address']} on {state['interface']} ({node['namespace']})")
    print(f"links: {args.link} each way (tc tbf); state: {emulate.state_path()}")
    if state.get("slurm"):
        print(f"slurm: slurmctld on {state['nodes'][0]['name']}, slurmd on every node, "
              f"partition {slurm.PARTITION}, MpiDefault={args.mpi_default}; "
              f"SLURM_CONF={state['slurm']['conf']}")  # fmt: skip
        print(f"shared work folder (each node has its own /tmp): {state['slurm']['work']}")
        print("next: workshop cluster run -- sbatch --wait JOB.sh")
    else:
        print("next: workshop cluster run -- workshop run -np 2 --controller gloo")
    return 0


def _state():
    from workshop.cluster import emulate

    emulate.require_root()
    state = emulate.read_state()
    if state is None:
        raise emulate.ClusterError("no cluster is up: `workshop cluster up` first")
    return state


def _run(args: argparse.Namespace) -> int:
    from workshop.cluster import emulate, hosts

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        return _fail(ValueError("nothing to run: workshop cluster run -- COMMAND ..."))
    try:
        state = _state()
        prefix = emulate.node_prefix(state, args.node or emulate.node_names(state)[0])
    except emulate.ClusterError as exc:
        return _fail(exc)
    from workshop.cluster.slurm import slurm_env

    env = dict(os.environ) | slurm_env(state)
    env[hosts.ENV_STATE] = str(emulate.state_path())
    if args.ranks_per_node:
        env[hosts.ENV_RANKS_PER_NODE] = str(args.ranks_per_node)
    sys.stdout.flush()
    os.execvpe(prefix[0], prefix + argv, env)  # the same pid: signals reach the command


def _status(args: argparse.Namespace) -> int:
    from workshop.cluster import emulate

    try:
        emulate.require_root()
        state = emulate.status()
    except emulate.ClusterError as exc:
        return _fail(exc)
    if args.json:
        print(json.dumps(state, indent=2))
        return 0 if state else 1
    if state is None:
        print("no cluster is up")
        return 1
    print(f"{len(state['nodes'])} nodes, links {state['spec']['link']} (tc tbf, each way)")
    for node in state["nodes"]:
        flags = [
            "namespace" if node["namespace_exists"] else "NO NAMESPACE",
            "sshd" if node["sshd_running"] else "NO SSHD",
            "link up" if node.get("link_up") else "LINK DOWN",
        ]
        print(f"  {node['name']} {node['address']}: {', '.join(flags)}")
    if state.get("slurm"):
        from workshop.cluster.slurm import sinfo

        result = sinfo(state)
        print(f"slurm (sinfo -N):\n{result.stdout.rstrip() or result.stderr.rstrip()}")
    return 0


def _link(args: argparse.Namespace) -> int:
    from workshop.cluster import emulate

    try:
        emulate.set_link(_state(), args.node, args.state == "up")
    except emulate.ClusterError as exc:
        return _fail(exc)
    print(f"{args.node}: link {args.state}")
    return 0


def _kill(args: argparse.Namespace) -> int:
    from workshop.cluster import emulate

    try:
        killed = emulate.kill_ranks(_state(), args.node)
    except emulate.ClusterError as exc:
        return _fail(exc)
    print(f"{args.node}: killed {len(killed)} rank process(es) {killed}")
    return 0 if killed else 1


def _down(args: argparse.Namespace) -> int:
    from workshop.cluster import emulate

    try:
        removed = emulate.down()
    except emulate.ClusterError as exc:
        return _fail(exc)
    print("removed: " + (", ".join(removed) if removed else "nothing (no cluster was up)"))
    return 0

"""Make, inspect and remove an emulated cluster (needs root).

``up`` builds, in this order, and writes each item to the state file *before* making it, so
``down`` removes everything that may exist even after a crash half-way:

* a switch namespace ``wsc-switch`` with a bridge;
* per node a namespace ``wsc-<node>``, a veth pair ``hsn0`` (in the node) / ``<node>`` (a
  bridge port in the switch), the node's address, and ``tc tbf`` at the link rate on both
  ends (so each direction of each link is capped);
* ``/etc/netns/wsc-<node>/hosts`` and ``.../ssh/ssh_config``, which ``ip netns exec`` mounts
  over ``/etc/hosts`` and ``/etc/ssh`` inside that node only: every node resolves every node's
  name to its 10.77.0.x address and ssh uses the cluster's own key and known_hosts (the
  user's ``~/.ssh`` is never touched);
* per node an ``sshd`` in its own UTS namespace whose hostname is the node's name; processes
  started over ssh (Horovod's ranks, Open MPI's ``orted``) inherit that hostname.

Nothing is routed outside the namespaces: the host's own network is not changed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from workshop.cluster.spec import (
    ALIVE_MISSED,
    BRIDGE,
    INTERFACE,
    NAMESPACE_PREFIX,
    SWITCH,
    ClusterSpec,
    Node,
)
from workshop.units import write_json_atomic

STATE_DIR = Path(os.environ.get("WORKSHOP_CLUSTER_DIR", "/run/workshop-cluster"))
NETNS_ETC = Path("/etc/netns")
SSHD = "/usr/sbin/sshd"
NOT_ROOT = (
    "workshop cluster needs root: it makes network namespaces, veth links, tc shaping and one "
    "sshd per node. Run it with sudo, in CI or in a container where you are root. Without "
    "root (Binder) the recorded cluster runs are in data/cluster/ (see its README.md; "
    "notebooks 03 and 06 replay them)."
)


class ClusterError(RuntimeError):
    """The cluster cannot be made, used or removed; the message says why and what to do."""


def require_root() -> None:
    if os.geteuid() != 0:
        raise ClusterError(NOT_ROOT)
    missing = [tool for tool in ("ip", "tc", "unshare", "nsenter", "ssh-keygen", "ssh")
               if not shutil.which(tool)]  # fmt: skip
    if not Path(SSHD).exists():
        missing.append(SSHD + " (Debian: apt-get install openssh-server)")
    if missing:
        raise ClusterError("workshop cluster needs " + ", ".join(missing))


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise ClusterError(f"`{' '.join(argv)}` failed: {result.stderr.strip()}")
    return result


def _in(namespace: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run("ip", "netns", "exec", namespace, *argv, check=check)


# ---------------------------------------------------------------- state file


def state_path(state_dir: Path = STATE_DIR) -> Path:
    return Path(state_dir) / "state.json"


def read_state(state_dir: Path = STATE_DIR) -> dict | None:
    """The state file of the cluster that is up (or half made), else None.

    Raises:
        ClusterError: the file exists but is not the JSON ``up`` writes.
    """
    path = state_path(state_dir)
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
        state["made"], state["spec"]  # noqa: B018 - both keys must be there
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterError(
            f"{path}: not a cluster state file ({exc}); remove what is listed in it by hand "
            "(`ip netns list`, /etc/netns/wsc-*), then the file"
        ) from exc
    return state


def _save(state: dict, state_dir: Path) -> None:
    write_json_atomic(state_path(state_dir), state)


def _will_make(state: dict, state_dir: Path, kind: str, name: str, **extra) -> None:
    """Record an item before making it (so a crash right after leaves it listed)."""
    state["made"].append({"kind": kind, "name": name, **extra})
    _save(state, state_dir)


# ---------------------------------------------------------------- up


def up(
    spec: ClusterSpec,
    state_dir: Path = STATE_DIR,
    *,
    slurm: bool = False,
    mpi_default: str = "pmix",
) -> dict:
    """Bring the cluster up; on any failure remove what was made and raise.

    With ``slurm``, Slurm runs on it too (:mod:`workshop.cluster.slurm`; ``mpi_default`` is its
    ``MpiDefault``).

    Returns:
        The state (also in ``state.json``): ``spec``, ``nodes`` (name, namespace, address),
        ``interface``, ``link_bits_per_s``, ``sshd`` (pid per node), ``made``.
    """
    require_root()
    state_dir = Path(state_dir)
    if read_state(state_dir) is not None:
        raise ClusterError(
            f"a cluster is up already ({state_path(state_dir)}): `workshop cluster status`, or "
            "`workshop cluster down` first"
        )
    state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(state_dir, 0o700)
    nodes = spec.node_list()
    state = {
        "spec": asdict(spec),
        "nodes": [asdict(node) for node in nodes],
        "interface": INTERFACE,
        "link_bits_per_s": spec.link_bits_per_s,
        "burst_bytes": spec.burst_bytes,
        "state_dir": str(state_dir),
        "sshd": {},
        "made": [],
    }
    _save(state, state_dir)
    try:
        if slurm:
            from workshop.cluster import slurm as slurm_

            slurm_.require_slurm()
        _make_network(spec, nodes, state, state_dir)
        _make_ssh(spec, nodes, state, state_dir)
        _check_ssh(nodes, state)
        if slurm:
            slurm_.start(
                state,
                lambda kind, name, **extra: _will_make(state, state_dir, kind, name, **extra),
                mpi_default=mpi_default,
            )
            _save(state, state_dir)
    except BaseException:
        down(state_dir)
        raise
    return state


def _make_network(spec: ClusterSpec, nodes: list[Node], state: dict, state_dir: Path) -> None:
    _will_make(state, state_dir, "netns", SWITCH)
    _run("ip", "netns", "add", SWITCH)
    _in(SWITCH, "ip", "link", "add", BRIDGE, "type", "bridge")
    _in(SWITCH, "ip", "link", "set", BRIDGE, "up")
    for node in nodes:
        _will_make(state, state_dir, "netns", node.namespace)
        _run("ip", "netns", "add", node.namespace)
        port = node.name  # the bridge port's name in the switch namespace
        _run(
            "ip", "link", "add", INTERFACE, "netns", node.namespace, "type", "veth",
            "peer", "name", port, "netns", SWITCH,
        )  # fmt: skip
        _in(SWITCH, "ip", "link", "set", port, "master", BRIDGE)
        _in(SWITCH, "ip", "link", "set", port, "up")
        _in(SWITCH, "tc", *spec.tbf_args(port))
        _in(node.namespace, "ip", "link", "set", "lo", "up")
        _in(node.namespace, "ip", "addr", "add", f"{node.address}/24", "dev", INTERFACE)
        _in(node.namespace, "ip", "link", "set", INTERFACE, "up")
        _in(node.namespace, "tc", *spec.tbf_args(INTERFACE))


def _make_ssh(spec: ClusterSpec, nodes: list[Node], state: dict, state_dir: Path) -> None:
    key = state_dir / "id_ed25519"
    host_key = state_dir / "ssh_host_ed25519_key"
    for path, comment in ((key, "workshop-cluster"), (host_key, "workshop-cluster-host")):
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))
    (state_dir / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    host_pub = Path(f"{host_key}.pub").read_text().split()[:2]
    (state_dir / "known_hosts").write_text(
        "".join(f"{n.name},{n.address} {' '.join(host_pub)}\n" for n in nodes)
    )
    if not NETNS_ETC.exists():
        _will_make(state, state_dir, "dir", str(NETNS_ETC))
        NETNS_ETC.mkdir()
    if not Path("/run/sshd").exists():  # sshd's privilege separation directory
        _will_make(state, state_dir, "dir", "/run/sshd")
        Path("/run/sshd").mkdir(mode=0o755)
    for node in nodes:
        etc = NETNS_ETC / node.namespace
        _will_make(state, state_dir, "tree", str(etc))
        (etc / "ssh").mkdir(parents=True)
        (etc / "hosts").write_text(spec.hosts_file())
        (etc / "ssh" / "ssh_config").write_text(_ssh_config(state_dir, spec.alive_s))
        config = state_dir / f"sshd_config.{node.name}"
        config.write_text(_sshd_config(node, state_dir))
        log = (state_dir / f"sshd.{node.name}.log").open("w")
        _will_make(state, state_dir, "sshd", node.name)
        process = subprocess.Popen(
            ["ip", "netns", "exec", node.namespace, "unshare", "--uts", "sh", "-c",
             'hostname "$0" && exec "$1" -D -e -f "$2"', node.name, SSHD, str(config)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        state["sshd"][node.name] = process.pid
        _save(state, state_dir)


def _ssh_config(state_dir: Path, alive_s: int) -> str:
    # ServerAlive: a node whose link goes down is noticed after ALIVE_MISSED unanswered
    # keep-alives (~15 s with the default 5 s; ssh exits 255), which is what makes horovodrun
    # and mpirun end the job instead of waiting for TCP's timeouts.
    # LogLevel INFO keeps ssh's "Timeout, server nodeb not responding." in the launcher's log.
    return (
        "Host *\n"
        f"  IdentityFile {state_dir}/id_ed25519\n"
        f"  UserKnownHostsFile {state_dir}/known_hosts\n"
        "  GlobalKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking yes\n"
        "  BatchMode yes\n"
        f"  ServerAliveInterval {alive_s}\n"
        f"  ServerAliveCountMax {ALIVE_MISSED}\n"
        "  ConnectTimeout 10\n"
        "  LogLevel INFO\n"
    )


def _sshd_config(node: Node, state_dir: Path) -> str:
    return (
        f"ListenAddress {node.address}\n"
        "Port 22\n"
        f"HostKey {state_dir}/ssh_host_ed25519_key\n"
        f"AuthorizedKeysFile {state_dir}/authorized_keys\n"
        f"PidFile {state_dir}/sshd.{node.name}.pid\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM no\n"
        "StrictModes no\n"
        "PrintMotd no\n"
        "ClientAliveInterval 5\n"
        "ClientAliveCountMax 3\n"
        "MaxStartups 100\n"
        "MaxSessions 100\n"
    )


def _check_ssh(nodes: list[Node], state: dict, timeout_s: float = 20.0) -> None:
    """From the first node, ssh to every node and read its hostname (sshd has started, the key,
    the names and the hostnames are right)."""
    deadline = time.monotonic() + timeout_s
    for node in nodes:
        while True:
            result = run_on(state, nodes[0].name, ["ssh", node.name, "hostname"], check=False)
            if result.returncode == 0 and result.stdout.strip() == node.name:
                break
            if time.monotonic() > deadline:
                log = Path(state["state_dir"]) / f"sshd.{node.name}.log"
                raise ClusterError(
                    f"ssh from {nodes[0].name} to {node.name} failed: "
                    f"{(result.stderr or result.stdout).strip()} (sshd log: {log})"
                )
            time.sleep(0.2)


# ---------------------------------------------------------------- use


def node_names(state: dict) -> list[str]:
    return [node["name"] for node in state["nodes"]]


def _node(state: dict, name: str) -> dict:
    for node in state["nodes"]:
        if node["name"] == name:
            return node
    raise ClusterError(f"no node {name!r} in this cluster (nodes: {', '.join(node_names(state))})")


def node_prefix(state: dict, name: str) -> list[str]:
    """The command prefix that runs a program on node ``name``: its network namespace, its
    /etc/hosts and /etc/ssh (``ip netns exec``), and its hostname (its sshd's UTS namespace)."""
    node = _node(state, name)
    pid = state["sshd"].get(name)
    if not pid or not Path(f"/proc/{pid}").exists():
        raise ClusterError(
            f"the sshd of {name} (pid {pid}) is not running: `workshop cluster down`, then `up`"
        )
    return ["ip", "netns", "exec", node["namespace"], "nsenter", f"--uts=/proc/{pid}/ns/uts", "--"]


def run_on(state: dict, name: str, argv: list[str], *, check: bool = True):
    """Run ``argv`` on node ``name`` and wait for it (CompletedProcess, text output)."""
    return _run(*node_prefix(state, name), *argv, check=check)


def node_pids(namespace: str) -> list[int]:
    """Processes whose network namespace is ``namespace``."""
    result = _run("ip", "netns", "pids", namespace, check=False)
    return [int(pid) for pid in result.stdout.split()]


def kill_ranks(state: dict, name: str) -> list[int]:
    """SIGKILL every training process (``--run-dir`` in its command line) on node ``name``;
    returns their pids."""
    killed = []
    for pid in node_pids(_node(state, name)["namespace"]):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"--run-dir" in cmdline:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        except (OSError, ProcessLookupError):
            continue
    return killed


def stop_job_daemons(nodes: list[str], since: float) -> list[int]:
    """SIGKILL the Open MPI daemons (``orted``) started on the cluster's nodes since ``since``
    (seconds since the epoch): after a node was lost, its orted may outlive mpirun until its
    sshd gives up on the session. Returns their pids."""
    import psutil

    killed = []
    for name in nodes:
        for pid in node_pids(NAMESPACE_PREFIX + name):
            try:
                process = psutil.Process(pid)
                if process.name() == "orted" and process.create_time() >= since:
                    process.kill()
                    killed.append(pid)
            except psutil.Error:
                continue
    return killed


def set_link(state: dict, name: str, up_: bool) -> None:
    """Set node ``name``'s cluster interface up or down (a cable pulled, a switch port off)."""
    namespace = _node(state, name)["namespace"]
    _in(namespace, "ip", "link", "set", state["interface"], "up" if up_ else "down")


def set_rate(state: dict, link: str, state_dir: Path = STATE_DIR) -> dict:
    """Change every link's rate in place (both ends, ``tc qdisc replace``); returns the state,
    also saved, with the new ``spec.link``."""
    spec = ClusterSpec(nodes=len(state["nodes"]), link=link)
    for node in state["nodes"]:
        for namespace, device in ((node["namespace"], state["interface"]), (SWITCH, node["name"])):
            _in(namespace, "tc", *["replace" if a == "add" else a for a in spec.tbf_args(device)])
    state["spec"] = asdict(spec)
    state["link_bits_per_s"] = spec.link_bits_per_s
    state["burst_bytes"] = spec.burst_bytes
    _save(state, Path(state_dir))
    return state


def status(state_dir: Path = STATE_DIR) -> dict | None:
    """The cluster's state with, per node, whether its namespace exists, its sshd runs, its
    interface is up, and its qdisc; None when no cluster is up."""
    state = read_state(state_dir)
    if state is None:
        return None
    existing = set(_run("ip", "netns", "list", check=False).stdout.split())
    for node in state["nodes"]:
        pid = state["sshd"].get(node["name"])
        node["namespace_exists"] = node["namespace"] in existing
        node["sshd_running"] = bool(pid) and Path(f"/proc/{pid}").exists()
        if node["namespace_exists"]:
            link = _in(
                node["namespace"], "ip", "-o", "link", "show", state["interface"], check=False
            )
            node["link_up"] = "state UP" in link.stdout or ",UP" in link.stdout.split(">")[0]
            qdisc = _in(
                node["namespace"], "tc", "qdisc", "show", "dev", state["interface"], check=False
            )
            node["qdisc"] = qdisc.stdout.strip()
    return state


# ---------------------------------------------------------------- down


def down(state_dir: Path = STATE_DIR) -> list[str]:
    """Remove everything the state file lists (in reverse order), whatever is left of it.

    Every process in the cluster's namespaces is killed (sshd, ranks, orted), then the
    namespaces, the /etc/netns entries and the state directory are removed.

    Returns:
        What was removed, one line each.
    """
    require_root()
    state_dir = Path(state_dir)
    state = read_state(state_dir)
    if state is None:
        return []
    from workshop.cluster import slurm

    removed = slurm.stop(state, _kill)
    made = list(reversed(state["made"]))
    namespaces = [item["name"] for item in made if item["kind"] == "netns"]
    for name, pid in state["sshd"].items():
        if _is_our_sshd(pid, state_dir / f"sshd_config.{name}"):
            _kill(pid)
    for namespace in namespaces:
        for pid in node_pids(namespace):
            _kill(pid)
    for item in made:
        kind, name = item["kind"], item["name"]
        if kind == "netns":
            if _run("ip", "netns", "del", name, check=False).returncode == 0:
                removed.append(f"network namespace {name}")
        elif kind == "tree" and Path(name).exists():
            shutil.rmtree(name)
            removed.append(name)
        elif kind == "dir" and Path(name).is_dir() and not any(Path(name).iterdir()):
            Path(name).rmdir()
            removed.append(name)
        elif kind == "sshd":
            removed.append(f"sshd of {name}")
    shutil.rmtree(state_dir, ignore_errors=True)
    return removed


def _is_our_sshd(pid: int, config: Path) -> bool:
    """Whether ``pid`` is still the sshd ``up`` started (a pid may be reused after a reboot
    or a crash; nothing else is ever killed)."""
    try:
        return str(config).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _kill(pid: int, grace_s: float = 2.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if _reap(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap(pid)


def _reap(pid: int) -> bool:
    """Collect ``pid`` if it is our child (a zombie would keep answering ``kill 0``)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        return False

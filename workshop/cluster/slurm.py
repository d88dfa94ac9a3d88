"""Slurm on the emulated cluster (``workshop cluster up --slurm``, root): a real batch scheduler
in front of the nodes, so that generated job scripts are submitted with ``sbatch`` for real.

What it starts, each recorded with its pid in the cluster's state file as it starts (``down``
stops them by pid, whatever else happened):

* one ``munged`` for all nodes (they share this machine's filesystem), with a key made for the
  cluster and its socket in the state folder;
* ``slurmctld`` on the first node, ``slurmd -N <node>`` on every node; each daemon runs in its
  node's network namespace (``nsenter --net``, which keeps the cgroup mounts that ``ip netns
  exec`` hides) and UTS namespace (the node's hostname), and in a mount namespace of its own
  whose ``/tmp`` is a folder of that node: Slurm's PMIx plugin makes
  ``/tmp/spmix_appdir_<uid>_<job>.<step>`` on each node, and two nodes sharing one ``/tmp``
  make the second node's step fail;
* a shared work folder, ``<state folder>/work``: every node sees the same files everywhere
  but in ``/tmp``, so a job's script, output and run directories go there (or anywhere
  outside ``/tmp``);
* one ``slurm.conf``: the nodes by their hostnames and addresses, one partition
  ``workshop``, ``MpiDefault=pmix`` (``none`` on request: a site without PMI), no cgroups
  (``proctrack/linuxproc``, ``task/none``) and no accounting.

Slurm's clients (``sbatch``, ``squeue``, ``sinfo``, ``sacct``) find it through ``SLURM_CONF``,
which ``workshop cluster run`` sets.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

PARTITION = "workshop"
DAEMONS = ("munged", "slurmctld", "slurmd")
PACKAGES = "slurmctld slurmd slurm-client munge"


class SlurmError(RuntimeError):
    """Slurm cannot be started or used on the emulated cluster; the message says why."""


def require_slurm() -> None:
    missing = [tool for tool in (*DAEMONS, "sbatch", "sinfo", "squeue") if not shutil.which(tool)]
    if missing:
        raise SlurmError(
            f"Slurm is not installed ({', '.join(missing)} missing): "
            f"apt-get install -y {PACKAGES}, or `bash scripts/setup.sh --slurm` as root"
        )


def conf_path(state: dict) -> Path:
    return Path(state["state_dir"]) / "slurm" / "slurm.conf"


def slurm_env(state: dict) -> dict[str, str]:
    """What Slurm's clients need to find this cluster's controller (empty without Slurm)."""
    if not state.get("slurm"):
        return {}
    return {"SLURM_CONF": str(conf_path(state))}


def slurm_conf(state: dict, mpi_default: str, cpus: int) -> str:
    """The cluster's ``slurm.conf``."""
    base = Path(state["state_dir"]) / "slurm"
    first = state["nodes"][0]
    nodes = "".join(
        f"NodeName={n['name']} NodeAddr={n['address']} CPUs={cpus} State=UNKNOWN\n"
        for n in state["nodes"]
    )
    return (
        "ClusterName=workshop\n"
        f"SlurmctldHost={first['name']}({first['address']})\n"
        "SlurmUser=root\n"
        "SlurmdUser=root\n"
        "AuthType=auth/munge\n"
        "CredType=cred/munge\n"
        f"AuthInfo=socket={base.parent / 'munge' / 'munge.socket'}\n"
        f"StateSaveLocation={base}/ctld\n"
        f"SlurmdSpoolDir={base}/spool/%n\n"
        f"SlurmctldPidFile={base}/slurmctld.pid\n"
        f"SlurmdPidFile={base}/slurmd.%n.pid\n"
        f"SlurmctldLogFile={base}/slurmctld.log\n"
        f"SlurmdLogFile={base}/slurmd.%n.log\n"
        "SlurmctldPort=6817\n"
        "SlurmdPort=6818\n"
        f"MpiDefault={mpi_default}\n"
        "ProctrackType=proctrack/linuxproc\n"
        "TaskPlugin=task/none\n"
        "JobAcctGatherType=jobacct_gather/none\n"
        "AccountingStorageType=accounting_storage/none\n"
        "JobCompType=jobcomp/none\n"
        "SchedulerType=sched/backfill\n"
        "SelectType=select/cons_tres\n"
        "SelectTypeParameters=CR_Core\n"
        "ReturnToService=2\n"
        "SlurmctldTimeout=30\n"
        "SlurmdTimeout=30\n"
        "InactiveLimit=0\n"
        "KillWait=5\n"
        f"{nodes}"
        f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
    )


def _under_tmp() -> list[str]:
    """The folders of this installation that lie under /tmp (a clone and its environment, as
    a test's clone may): a node's own /tmp must still show them, or its jobs find no Python."""
    import sys

    import workshop

    keep = set()
    for path in (Path(sys.prefix), Path(workshop.__file__).resolve().parents[1]):
        parts = path.resolve().parts
        if len(parts) > 2 and parts[:2] == ("/", "tmp"):
            keep.add(parts[2])  # the top folder below /tmp (e.g. a clone's)
    return sorted(keep)


def _node_daemon(state: dict, node: dict, argv: list[str]) -> list[str]:
    """``argv`` in the node's network and UTS namespaces, with the node's own ``/tmp`` (the
    folders of this installation under /tmp bound back into it)."""
    base = Path(state["state_dir"]) / "slurm"
    tmp, host_tmp = base / "tmp" / node["name"], base / "host-tmp"
    for folder in (tmp, host_tmp):
        folder.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o1777)
    keep = "".join(
        f'mkdir -p "/tmp/{name}" && mount --bind "{host_tmp}/{name}" "/tmp/{name}" && '
        for name in _under_tmp()
    )
    script = (f'mount --bind /tmp "{host_tmp}" && mount --bind "{tmp}" /tmp && {keep}'
              'exec "$@"')  # fmt: skip
    sshd = state["sshd"][node["name"]]
    return [
        "nsenter", f"--net=/run/netns/{node['namespace']}", f"--uts=/proc/{sshd}/ns/uts", "--",
        "unshare", "--mount", "--propagation", "private", "--",
        "sh", "-c", script, "sh", *argv,
    ]  # fmt: skip


def start(
    state: dict,
    will_make,
    *,
    mpi_default: str = "pmix",
    timeout_s: float = 60.0,
) -> None:
    """Start munged, slurmctld and every slurmd for the cluster of ``state``; wait until every
    node is idle.

    Args:
        state: the cluster's state (nodes, sshd pids, state_dir); ``slurm`` and the daemons'
            pids are added to it.
        will_make: ``(kind, name, **extra)``: records an item in the state file before it is
            made (:func:`workshop.cluster.emulate._will_make`).
        mpi_default: Slurm's ``MpiDefault`` (``pmix``; ``none`` emulates a site without PMI).
        timeout_s: how long the nodes may take to come up.

    Raises:
        SlurmError: a daemon failed to start or the nodes did not come up (with its log).
    """
    require_slurm()
    base = Path(state["state_dir"])
    munge_dir, slurm_dir, work = base / "munge", base / "slurm", base / "work"
    for folder in (munge_dir, slurm_dir, slurm_dir / "ctld", slurm_dir / "spool", work):
        folder.mkdir(parents=True, exist_ok=True)
    work.chmod(0o1777)
    munge_dir.chmod(0o700)
    key = munge_dir / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    cpus = os.cpu_count() or 1
    conf_path(state).write_text(slurm_conf(state, mpi_default, cpus))
    state["slurm"] = {
        "conf": str(conf_path(state)),
        "mpi_default": mpi_default,
        "work": str(work),
    }

    def daemon(name: str, argv: list[str], log: Path) -> None:
        with log.open("w") as out:
            process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env=os.environ | slurm_env(state),
            )  # fmt: skip
        will_make("pid", name, pid=process.pid)

    daemon(
        "munged",
        ["munged", "--foreground", "--force", f"--key-file={key}",
         f"--socket={munge_dir / 'munge.socket'}", f"--pid-file={munge_dir / 'munged.pid'}",
         f"--log-file={munge_dir / 'munged.log'}", f"--seed-file={munge_dir / 'munged.seed'}"],
        munge_dir / "munged.out",
    )  # fmt: skip
    _wait_for(lambda: (munge_dir / "munge.socket").exists(), 10, "munged", munge_dir)
    conf = str(conf_path(state))
    first = state["nodes"][0]
    daemon("slurmctld", _node_daemon(state, first, ["slurmctld", "-D", "-f", conf]),
           slurm_dir / "slurmctld.out")  # fmt: skip
    for node in state["nodes"]:
        argv = ["slurmd", "-D", "-N", node["name"], "-f", conf]
        daemon(f"slurmd-{node['name']}", _node_daemon(state, node, argv),
               slurm_dir / f"slurmd.{node['name']}.out")  # fmt: skip
    _wait_for(lambda: _all_idle(state), timeout_s, "the Slurm nodes", slurm_dir)


def _wait_for(ready, timeout_s: float, what: str, logs: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.3)
    tails = []
    for log in sorted(logs.glob("*.log")) + sorted(logs.glob("*.out")):
        text = log.read_text(errors="replace").strip().splitlines()[-8:]
        if text:
            tails.append(f"--- {log}\n" + "\n".join(text))
    raise SlurmError(f"{what} did not come up in {timeout_s:.0f} s:\n" + "\n".join(tails))


def _on_first_node(state: dict) -> list[str]:
    """The prefix that runs a client on the first node (its network and hostname)."""
    first = state["nodes"][0]
    sshd = state["sshd"][first["name"]]
    return ["nsenter", f"--net=/run/netns/{first['namespace']}", f"--uts=/proc/{sshd}/ns/uts",
            "--"]  # fmt: skip


def sinfo(state: dict) -> subprocess.CompletedProcess:
    """``sinfo -N`` of the cluster (node, partition, state), run on the first node."""
    argv = [*_on_first_node(state), "sinfo", "-N", "-h", "-o", "%N %P %T"]
    return subprocess.run(argv, capture_output=True, text=True, env=os.environ | slurm_env(state))


def _all_idle(state: dict) -> bool:
    result = sinfo(state)
    if result.returncode:
        return False
    states = dict(line.split()[0::2] for line in result.stdout.splitlines() if line.strip())
    return len(states) == len(state["nodes"]) and all(s == "idle" for s in states.values())


def stop(state: dict, kill) -> list[str]:
    """Stop every Slurm daemon ``start`` recorded (by pid, checking it is still ours: a pid
    whose command line no longer names this cluster's state folder is left alone)."""
    stopped = []
    for item in reversed(state.get("made", [])):
        if item["kind"] != "pid":
            continue
        pid = item["pid"]
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if state["state_dir"].encode() in cmdline:
            kill(pid)
            stopped.append(f"{item['name']} (pid {pid})")
    return stopped


def run_job(
    script: Path,
    state: dict,
    *,
    report=print,
    poll_s: float = 2.0,
    timeout_s: float = 600.0,
) -> tuple[str, Path | None]:
    """Submit ``script`` (in the cluster's shared work folder) with ``sbatch`` and watch it
    with ``squeue`` until it ends, as a learner would in a terminal (lesson 03, ``LIVE``).

    Returns:
        ``(job id, its .out file or None)``.

    Raises:
        SlurmError: ``sbatch`` refused the script, or the job outlived ``timeout_s`` (it is
            cancelled).
    """
    prefix = _on_first_node(state)
    env = os.environ | slurm_env(state)
    work = Path(state["slurm"]["work"])

    def client(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, *argv], capture_output=True, text=True, env=env,
                              cwd=work)  # fmt: skip

    submitted = client("sbatch", "--parsable", Path(script).name)
    if submitted.returncode:
        raise SlurmError(f"sbatch {script}: {submitted.stderr.strip()}")
    job = submitted.stdout.strip().split(";")[0]
    report(f"$ sbatch {Path(script).name}\nSubmitted batch job {job}")
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        queue = client("squeue", "-h", "-j", job, "-o", "%i %j %T %M %N").stdout.strip()
        if queue != last and queue:
            report(f"$ squeue -j {job}\n{queue}")
            last = queue
        if not queue:
            break
        time.sleep(poll_s)
    else:
        client("scancel", job)
        raise SlurmError(f"job {job} still running after {timeout_s:.0f} s: cancelled")
    outs = sorted(work.glob(f"*-{job}.out"))
    return job, outs[0] if outs else None
